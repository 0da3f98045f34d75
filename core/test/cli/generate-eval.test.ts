/**
 * `bun run generate` and `bun run eval` (core/src/cli/{generate,eval}.ts) on the default run's
 * checkpoint and its fp32 export (zero-to-fp32), and on a Hub-style directory with its own
 * tokenizer.json: eval on the checkpoint reproduces the training's validation loss (a job without
 * the router aux term, so both are the same cross-entropy); checkpoint and export give the same
 * loss and the same greedy text, with and without the KV cache; bad input exits 2 naming the
 * option or file, without a stack trace.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { saveStateDict } from "../../src/checkpoint/hf-save.ts";
import { DEFAULT_JOB } from "../../src/config/default-job.ts";
import { HfTokenizer } from "../../src/data/hf-tokenizer.ts";
import { llamaConfig } from "../../src/models/config.ts";
import { LlamaForCausalLM } from "../../src/models/llama.ts";
import { writeFixtureTokenizer } from "../data/hub-tokenizer-fixture.ts";

const tmp = mkdtempSync(join(tmpdir(), "gen-eval-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function sh(script: string, args: string[]): { code: number; out: string; stdout: string; stderr: string } {
  const p = Bun.spawnSync(["bun", `core/src/cli/${script}.ts`, ...args], { stdout: "pipe", stderr: "pipe" });
  const stdout = p.stdout.toString();
  const stderr = p.stderr.toString();
  return { code: p.exitCode ?? -1, out: stdout + stderr, stdout, stderr };
}

/** The default job with a checkpoint at the end of `steps` steps; `over` replaces model keys. */
function defaultJob(name: string, steps: number, model: Record<string, unknown> = {}): { job: string; ckpt: string } {
  const j = JSON.parse(JSON.stringify(DEFAULT_JOB)) as Record<string, unknown> & { model: Record<string, unknown> };
  const ckpt = join(tmp, `${name}-ckpt`);
  Object.assign(j, { steps, eval_interval: steps, checkpoint: { dir: ckpt, save_interval: 0, keep_last: 1 } });
  Object.assign(j.model, model);
  const job = join(tmp, `${name}.json`);
  writeFileSync(job, JSON.stringify(j));
  return { job, ckpt };
}

const lossOf = (out: string) => Number(/eval +loss ([\d.]+) \| perplexity ([\d.]+)/.exec(out)?.[1]);

describe("eval --from CKPT of a world-2 run", () => {
  test("scores eval_batches micro-batches per rank, as training did: the run's val_loss", () => {
    const { job, ckpt } = defaultJob("world2", 3, { output_router_logits: false });
    const tr = sh("train", ["--config", job, "--backend", "cpu", "--world-size", "2"]);
    expect(tr.code).toBe(0);
    const val = Number(/done .* val_loss ([\d.]+)/.exec(tr.out)?.[1]);
    const e = sh("eval", ["--from", ckpt, "--backend", "cpu"]);
    expect(e.code).toBe(0);
    expect(e.out).toContain("8 batches of 8 × 64: 4 per rank × world_size 2, as training evaluates");
    expect(lossOf(e.out)).toBe(val);
  }, 300_000);
});

describe("generate and eval on the default run's checkpoint and its fp32 export", () => {
  test("eval reproduces the training val_loss; export = checkpoint; greedy text equal with and without the KV cache", () => {
    // the default model without the router aux term in the loss: val_loss is pure cross-entropy
    const { job, ckpt } = defaultJob("noaux", 5, { output_router_logits: false });
    const tr = sh("train", ["--config", job, "--backend", "cpu"]);
    expect(tr.code).toBe(0);
    const val = Number(/done .* val_loss ([\d.]+)/.exec(tr.out)?.[1]);
    expect(val).toBeGreaterThan(1);
    const fp32 = join(tmp, "noaux.safetensors");
    expect(sh("zero-to-fp32", [ckpt, fp32]).code).toBe(0);

    const e1 = sh("eval", ["--from", ckpt, "--backend", "cpu"]);
    expect(e1.code).toBe(0);
    expect(e1.out).toContain("moby-dick validation split (4 batches of 8 × 64: 4 per rank × world_size 1, as training evaluates)");
    expect(lossOf(e1.out)).toBe(val);
    const ppl = Number(/perplexity ([\d.]+)/.exec(e1.out)?.[1]);
    expect(Math.abs(ppl - Math.exp(val))).toBeLessThan(Math.exp(val) * 1e-3);
    // the export names its checkpoint in its metadata: no --config needed
    const e2 = sh("eval", ["--from", fp32, "--backend", "cpu"]);
    expect(e2.code).toBe(0);
    expect(lossOf(e2.out)).toBe(val);
    // --data: a whole file, windows of --seq-len
    const txt = join(tmp, "ishmael.txt");
    const text = "Call me Ishmael. Some years ago - never mind how long precisely - having little or no money in my purse. ".repeat(12);
    writeFileSync(txt, text);
    const e3 = sh("eval", ["--from", fp32, "--data", txt, "--seq-len", "37", "--batch-size", "5", "--backend", "cpu"]);
    expect(e3.code).toBe(0);
    const windows = Math.floor((text.length - 1) / 37);
    expect(e3.out).toContain(`${txt}: ${text.length} tokens, ${windows} windows of 37`);
    expect(e3.out).toContain(`${windows * 36} tokens scored`);
    expect(lossOf(e3.out)).toBeGreaterThan(1);

    const prompt = "Call me Ishmael. Some";
    const g1 = sh("generate", ["--from", ckpt, "--prompt", prompt, "--max-new-tokens", "30", "--backend", "cpu"]);
    const g2 = sh("generate", ["--from", fp32, "--prompt", prompt, "--max-new-tokens", "30", "--backend", "cpu", "--no-cache"]);
    expect(g1.code).toBe(0);
    expect(g2.code).toBe(0);
    expect(g1.stdout.startsWith(prompt)).toBe(true);
    expect(g1.stdout.length).toBeGreaterThan(prompt.length);
    expect(g1.stdout).toBe(g2.stdout);
    expect(g1.stderr).toContain("generated  30 tokens after a 21-token prompt");
    expect(g1.stderr).toContain("KV cache");
    // sampling: reproducible by seed
    const s1 = sh("generate", ["--from", ckpt, "--prompt", prompt, "--max-new-tokens", "20", "--temperature", "0.9", "--top-k", "20", "--top-p", "0.9", "--seed", "7", "--backend", "cpu"]);
    const s2 = sh("generate", ["--from", fp32, "--prompt", prompt, "--max-new-tokens", "20", "--temperature", "0.9", "--top-k", "20", "--top-p", "0.9", "--seed", "7", "--backend", "cpu"]);
    expect(s1.code).toBe(0);
    expect(s1.stdout).toBe(s2.stdout);
  }, 300_000);

  test("the default job itself (router aux on in training): eval's cross-entropy is below val_loss by the aux term; generate on auto", () => {
    const { job, ckpt } = defaultJob("default", 3);
    const tr = sh("train", ["--config", job, "--backend", "cpu"]);
    expect(tr.code).toBe(0);
    const val = Number(/done .* val_loss ([\d.]+)/.exec(tr.out)?.[1]);
    const e = sh("eval", ["--from", ckpt]);
    expect(e.code).toBe(0);
    const d = val - lossOf(e.out); // router_aux_loss_coef 0.01 × aux ≈ 2 (uniform routing)
    expect(d).toBeGreaterThan(0.01);
    expect(d).toBeLessThan(0.03);
    const g = sh("generate", ["--from", ckpt, "--prompt", "The whale", "--max-new-tokens", "8"]);
    expect(g.code).toBe(0);
    expect(g.stderr).toMatch(/^backend +(cpu|webgpu) on ".+" \(auto → .+\)$/m);
  }, 300_000);
});

describe("a Hub-style directory with tokenizer.json", () => {
  test("generate and eval use the directory's own tokenizer", async () => {
    const hub = join(tmp, "hub");
    writeFixtureTokenizer(hub);
    const hf = { architectures: ["LlamaForCausalLM"], model_type: "llama", vocab_size: 266, hidden_size: 24, intermediate_size: 40, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64, tie_word_embeddings: false };
    writeFileSync(join(hub, "config.json"), JSON.stringify(hf));
    const m = new LlamaForCausalLM(new CpuBackend(), llamaConfig({ ...hf, initializer_range: 0.3 }), { seed: 9 });
    saveStateDict(join(hub, "model.safetensors"), [...(await m.stateDict())].map(([n, t]) => [n, { shape: t.shape, data: t.data as Float32Array }] as const));
    const g = sh("generate", ["--from", hub, "--prompt", "the whale", "--max-new-tokens", "12", "--backend", "cpu"]);
    expect(g.code).toBe(0);
    expect(g.stderr).toContain("(tokenizer.json beside the weights)");
    expect(g.stderr).toContain("after a 2-token prompt"); // "the" + "Ġwhale": the merges
    expect(g.stdout.startsWith("the whale")).toBe(true);
    const txt = join(tmp, "whale.txt");
    writeFileSync(txt, "the whale and the cat. ".repeat(30));
    const n = HfTokenizer.load(hub).encode("the whale and the cat. ".repeat(30)).length;
    const e = sh("eval", ["--from", hub, "--data", txt, "--seq-len", "16", "--backend", "cpu"]);
    expect(e.code).toBe(0);
    expect(e.out).toContain(`${txt}: ${n} tokens`);
    expect(lossOf(e.out)).toBeGreaterThan(0);
  }, 300_000);
});

describe("bad input exits 2 naming the option or file, no stack", () => {
  test("missing/unknown options, bad values, paths that are no model, a tokenizer larger than the model's vocabulary", () => {
    const notModel = join(tmp, "not-a-model");
    mkdirSync(notModel, { recursive: true });
    const lone = join(tmp, "lone");
    mkdirSync(lone, { recursive: true });
    saveStateDict(join(lone, "w.safetensors"), [["x", { shape: [2], data: Float32Array.from([1, 2]) }] as const]);
    const cases: [string, string[], RegExp][] = [
      ["generate", ["--prompt", "x"], /--from is required/],
      ["generate", ["--from", join(tmp, "nope"), "--prompt", "x"], /--from: .*nope does not exist/],
      ["generate", ["--from", notModel, "--prompt", "x"], /neither a ZeroMoE checkpoint .* nor a Hugging Face model directory/],
      ["generate", ["--from", join(lone, "w.safetensors"), "--prompt", "x"], /has no model config: pass --config/],
      ["generate", ["--from", notModel, "--prompt", "x", "--top-p", "1.5"], /--top-p: expected a number > 0 and ≤ 1, got "1.5"/],
      ["generate", ["--from", notModel, "--prompt", "x", "--temperature=-1"], /--temperature: expected a number ≥ 0/],
      ["generate", ["--from", notModel, "--promt", "x"], /unknown option "--promt"/],
      ["generate", ["--from", notModel, "--prompt", "x", "--backend", "gpu"], /--backend: expected auto, webgpu, cpu, got "gpu"; did you mean webgpu\? \(the GPU backend\)/],
      ["eval", ["--from", notModel, "--batch-size", "0"], /--batch-size: expected an integer ≥ 1, got "0"/],
      ["eval", ["--from", join(lone, "w.safetensors"), "--config", join(tmp, "missing.json")], /--config: .*missing.json does not exist/],
      ["generate", ["--from", join(tmp, "hub"), "--prompt", "x", "--tokenizer", join(tmp, "no-tok")], /data.tokenizer: .*no-tok does not exist/],
      ["generate", ["--from", join(tmp, "hub"), "--prompt", "x", "--tokenizer", "gpt2"], /tokenizer gpt2 \(--tokenizer\) has 50257 ids but the model's vocab_size is 266; this model cannot take it: use the tokenizer the model was trained with/],
    ];
    for (const [cli, args, want] of cases) {
      const r = sh(cli, args);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toMatch(want);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
  }, 300_000);
});
