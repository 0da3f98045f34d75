/**
 * Valid inputs that crashed the CLIs (issue 36), as real processes.
 *
 * - `bun run generate` with a model whose vocabulary is larger than the tokenizer's (padded
 *   vocabularies are the norm: Llama-3, Qwen and Mixtral pad to multiples): a sampled id past the
 *   tokenizer's range made `decode` throw a RangeError (exit 1, a stack). Now the logits past the
 *   tokenizer's range are never sampled: exit 0, the text decoded.
 * - A config.json that claims a larger model than its weights: eval, generate and train built the
 *   claimed model (hundreds of MB here, 2.2 GB in the report) before the weights' shapes refused
 *   it. Now the headers are matched against the model's parameter shapes first: exit 2, one line
 *   naming the shapes, and the process's peak RSS stays far below the claimed model's bytes.
 *
 * Hang guard: each child has 5 minutes. No wall-clock time is asserted.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { saveStateDict } from "../../src/checkpoint/hf-save.ts";
import { countParameters } from "../../src/config/param-count.ts";
import { resolveModelConfig } from "../../src/config/resolve-model.ts";
import { llamaConfig } from "../../src/models/config.ts";
import { LlamaForCausalLM } from "../../src/models/llama.ts";
import { TINY_LLAMA_HF } from "../tiny-llama-cli.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-valid-inputs-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const CLI = resolve(import.meta.dir, "../../src/cli");
const TEXT = join(ROOT, "text.txt");

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Peak resident set of the child, bytes. */
  maxRss: number;
}

// The CLI runs under a fresh wrapper process whose only child it is, and the wrapper writes the
// child's peak RSS to a file: a child's resource usage read in this process (getrusage of children)
// is the largest of every child this test process has waited for, so in a full `bun test` run an
// earlier file's training run (1.7 GB) showed up as this CLI's peak.
const WRAP = "const [out, ...cmd] = process.argv.slice(1); const r = Bun.spawnSync(cmd, { stdio: ['inherit', 'inherit', 'inherit'] }); require('node:fs').writeFileSync(out, String(r.resourceUsage?.maxRSS ?? 0)); process.exit(r.exitCode ?? 1);";
let runs = 0;
function cli(script: "eval" | "generate" | "train", args: string[]): Run {
  const rssFile = join(ROOT, `rss-${runs++}.txt`);
  const r = Bun.spawnSync(["bun", "-e", WRAP, rssFile, "bun", join(CLI, `${script}.ts`), ...args, ...(script === "train" ? [] : ["--backend", "cpu"])], { env: { ...process.env, CI: "1" }, timeout: 300_000, killSignal: "SIGKILL" });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString(), maxRss: Number(readFileSync(rssFile, "utf8")) };
}

/** Exit 2 and stderr exactly one line "error: …", no stack frames. @returns the line. */
function oneLine(r: Run): string {
  expect(r.code, r.stderr).toBe(2);
  const lines = r.stderr.split("\n").filter((l) => l.trim() !== "");
  expect(lines.length, r.stderr).toBe(1);
  expect(lines[0]).toStartWith("error: ");
  expect(r.stderr).not.toMatch(/^\s+at /m);
  return lines[0]!;
}

/** A Hugging Face directory of a small llama with `vocab` ids; `rig` edits the weights first. */
async function hubDir(name: string, vocab: number, rig?: (sd: Map<string, { shape: number[]; data: Float32Array }>) => void): Promise<string> {
  const d = join(ROOT, name);
  mkdirSync(d);
  const hf = { ...TINY_LLAMA_HF, vocab_size: vocab };
  writeFileSync(join(d, "config.json"), JSON.stringify(hf));
  const m = new LlamaForCausalLM(new CpuBackend(), llamaConfig({ ...hf, initializer_range: 0.3 }), { seed: 5 });
  const sd = new Map<string, { shape: number[]; data: Float32Array }>([...(await m.stateDict())].map(([n, t]) => [n, { shape: [...t.shape], data: Float32Array.from(t.data as Float32Array) }]));
  m.destroy();
  rig?.(sd);
  saveStateDict(join(d, "model.safetensors"), [...sd].map(([n, t]) => [n, t] as const));
  return d;
}

let BASE = "";
beforeAll(async () => {
  writeFileSync(TEXT, "It is not down in any map; true places never are. ".repeat(8));
  BASE = await hubDir("base", 256);
}, 300_000);

describe("generate with a padded vocabulary", () => {
  test("model vocab 320, byte tokenizer (256): the logits past 255 are never sampled", async () => {
    // the head scores ids 256..319 far above the byte ids, so an unmasked arg-max picks one
    const d = await hubDir("padded", 320, (sd) => {
      const head = sd.get("lm_head.weight")!;
      const norm = sd.get("model.norm.weight")!;
      norm.data.fill(1);
      for (let v = 0; v < 320; v++) for (let j = 0; j < 24; j++) head.data[v * 24 + j] = v >= 256 ? 50 * Math.sign(Math.sin(v * 7 + j)) : 0.01 * Math.cos(v + j);
    });
    for (const extra of [[], ["--temperature", "1.5", "--seed", "3"]]) {
      const r = cli("generate", ["--from", d, "--prompt", "Call me Ishmael.", "--max-new-tokens", "12", "--tokenizer", "byte", ...extra]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toStartWith("Call me Ishmael.");
      expect(r.stderr).toContain("vocab 320");
    }
  }, 300_000);
});

describe("a config.json that claims a larger model than its weights", () => {
  /** BASE's weights under a config.json with `over` applied. */
  function claiming(name: string, over: Record<string, unknown>): { dir: string; claimedBytes: number } {
    const d = join(ROOT, name);
    mkdirSync(d);
    copyFileSync(join(BASE, "model.safetensors"), join(d, "model.safetensors"));
    const cfg = { ...JSON.parse(readFileSync(join(BASE, "config.json"), "utf8")), ...over };
    writeFileSync(join(d, "config.json"), JSON.stringify(cfg));
    return { dir: d, claimedBytes: 4 * countParameters(resolveModelConfig(cfg, "model").config).total };
  }

  // ~0.74 GB of f32 parameters claimed: vocab 256 → 65536, hidden 24 → 1024, 4 layers
  const BIG = { vocab_size: 65536, hidden_size: 1024, intermediate_size: 2816, num_hidden_layers: 4, num_attention_heads: 8, num_key_value_heads: 8 };

  test.each(["eval", "generate"] as const)("%s: exit 2 naming the shapes, before the claimed model is built", (script) => {
    const { dir, claimedBytes } = claiming(`big-${script}`, BIG);
    expect(claimedBytes).toBeGreaterThan(5e8);
    const args = script === "eval" ? ["--from", dir, "--data", TEXT, "--seq-len", "16", "--max-batches", "1"] : ["--from", dir, "--prompt", "x"];
    const r = cli(script, args);
    const line = oneLine(r);
    expect(line).toContain("model.embed_tokens.weight");
    expect(line).toContain("[256, 24]");
    expect(line).toContain("[65536, 1024]");
    expect(r.maxRss).toBeLessThan(claimedBytes / 2);
  }, 300_000);

  test("train --init-from (model.from_pretrained): exit 2 naming the shapes, before the engine allocates", () => {
    const { dir, claimedBytes } = claiming("big-train", BIG);
    const job = join(ROOT, "job.json");
    writeFileSync(job, JSON.stringify({ model: { from_pretrained: dir }, data: { dataset: TEXT, tokenizer: "byte", seq_len: 16, validation_fraction: 0 }, steps: 1, backend: "cpu", train_micro_batch_size_per_gpu: 1 }));
    const r = cli("train", ["--config", job]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).not.toMatch(/^\s+at /m);
    expect(r.stderr).toContain("model.embed_tokens.weight");
    expect(r.stderr).toContain("[65536, 1024]");
    expect(r.maxRss).toBeLessThan(claimedBytes / 2);
  }, 300_000);
});
