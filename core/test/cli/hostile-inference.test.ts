/**
 * `bun run eval` / `bun run generate --from` on hostile Hugging Face files (task P, 2026-12-02),
 * as real processes. Before the fixes: a .safetensors holding a 10 GiB (sparse) tensor the model
 * does not use died with "RangeError: Out of memory" and a stack (exit 1: every tensor was read
 * before any was matched), an index naming a missing shard gave ENOENT with a stack, an index entry
 * its shard does not hold was accepted, config.json with num_hidden_layers 1e9 hung building the
 * model (training refuses it: MODEL_COUNT_LIMITS), hidden_size 1e12 died in "cpu alloc … Out of
 * memory" (exit 1), and max_position_embeddings 1e12 made generate allocate a 48 TB KV cache
 * (both are now past the model bounds; the same guards are checked inside them at 2^20 and 2^24).
 * Each must now be exit 0 with the right result, or exit 2 with one line naming the file and what
 * is wrong. No wall-clock time is asserted; the child processes have a 5-minute limit (they take
 * seconds) so a hang fails instead of blocking the suite.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { closeSync, copyFileSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync, ftruncateSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { saveStateDict } from "../../src/checkpoint/hf-save.ts";
import { SafetensorsReader } from "../../src/checkpoint/safetensors.ts";
import { llamaConfig } from "../../src/models/config.ts";
import { LlamaForCausalLM } from "../../src/models/llama.ts";
import { TINY_LLAMA_HF as HF } from "../tiny-llama-cli.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-hostile-inference-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const CLI = resolve(import.meta.dir, "../../src/cli");

const BASE = join(ROOT, "base");
const TEXT = join(ROOT, "text.txt");
const GiB = 2 ** 30;

function cli(script: "eval" | "generate", args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = Bun.spawnSync(["bun", join(CLI, `${script}.ts`), ...args, "--backend", "cpu"], { env: { ...process.env, CI: "1" }, timeout: 300_000, killSignal: "SIGKILL" });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}
const evalOf = (dir: string) => cli("eval", ["--from", dir, "--data", TEXT, "--seq-len", "16", "--max-batches", "2"]);
const lossOf = (out: string) => Number(/eval +loss ([\d.]+)/.exec(out)?.[1]);

/** Bad input: exit 2, stderr "error: …" without stack frames (a config error lists its issues on
 * the lines after the first). @returns stderr. */
function badInput(r: { code: number | null; stderr: string }): string {
  expect(r.code, r.stderr).toBe(2);
  expect(r.stderr).toStartWith("error: ");
  expect(r.stderr).not.toMatch(/^\s+at /m);
  return r.stderr;
}

/** The single error line (bad input, and stderr is exactly one non-empty line). */
function oneLine(r: { code: number | null; stderr: string }): string {
  badInput(r);
  const lines = r.stderr.split("\n").filter((l) => l.trim() !== "");
  expect(lines.length, r.stderr).toBe(1);
  return lines[0]!;
}

/** A copy of BASE whose config.json has `over` applied. */
function withConfig(name: string, over: Record<string, unknown>): string {
  const d = join(ROOT, name);
  mkdirSync(d);
  copyFileSync(join(BASE, "model.safetensors"), join(d, "model.safetensors"));
  writeFileSync(join(d, "config.json"), JSON.stringify({ ...HF, ...over }));
  return d;
}

/** BASE's weights rewritten with `edit` applied to the header entries; the data section grows to
 * `dataBytes` as a sparse file (nothing is written there). */
function withHeader(name: string, edit: (h: Record<string, unknown>, dataBytes: number) => number): string {
  const d = join(ROOT, name);
  mkdirSync(d);
  writeFileSync(join(d, "config.json"), JSON.stringify(HF));
  const src = readFileSync(join(BASE, "model.safetensors"));
  const r = SafetensorsReader.open(join(BASE, "model.safetensors"));
  const h: Record<string, unknown> = {};
  for (const t of r.header.tensors) h[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [t.begin, t.end] };
  const data = src.subarray(r.header.dataStart);
  r.close();
  const total = edit(h, data.length);
  const json = Buffer.from(JSON.stringify(h));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  const fd = openSync(join(d, "model.safetensors"), "w");
  writeSync(fd, len);
  writeSync(fd, json);
  writeSync(fd, data);
  ftruncateSync(fd, 8 + json.length + total);
  closeSync(fd);
  return d;
}

let baseLoss = 0;
beforeAll(async () => {
  mkdirSync(BASE);
  writeFileSync(join(BASE, "config.json"), JSON.stringify(HF));
  const m = new LlamaForCausalLM(new CpuBackend(), llamaConfig({ ...HF, initializer_range: 0.3 }), { seed: 3 });
  saveStateDict(join(BASE, "model.safetensors"), [...(await m.stateDict())].map(([n, t]) => [n, { shape: t.shape, data: t.data as Float32Array }] as const));
  m.destroy();
  writeFileSync(TEXT, "It is not down in any map; true places never are. ".repeat(8));
  const r = evalOf(BASE);
  expect(r.code, r.stderr).toBe(0);
  baseLoss = lossOf(r.stdout + r.stderr);
  expect(baseLoss).toBeGreaterThan(1);
}, 300_000);

describe("weights: only the tensors the model uses are read, after their shapes are checked", () => {
  test("a 10 GiB tensor the model does not use: same loss as without it, a warning naming it", () => {
    const d = withHeader("sparse-unused", (h, n) => {
      h["zzz.unused"] = { dtype: "F32", shape: [(10 * GiB) / 4], data_offsets: [n, n + 10 * GiB] };
      return n + 10 * GiB;
    });
    const r = evalOf(d);
    expect(r.code, r.stderr).toBe(0);
    expect(lossOf(r.stdout + r.stderr)).toBe(baseLoss);
    expect(r.stderr).toContain("zzz.unused");
  }, 300_000);

  test("the embedding declared 10 GiB large: exit 2 naming both shapes, nothing read", () => {
    const rows = Math.floor((10 * GiB) / 4 / 24);
    const d = withHeader("sparse-embed", (h, n) => {
      const old = h["model.embed_tokens.weight"] as { data_offsets: [number, number] };
      h["zz.pad"] = { dtype: "U8", shape: [old.data_offsets[1] - old.data_offsets[0]], data_offsets: old.data_offsets };
      h["model.embed_tokens.weight"] = { dtype: "F32", shape: [rows, 24], data_offsets: [n, n + rows * 24 * 4] };
      return n + rows * 24 * 4;
    });
    const line = oneLine(evalOf(d));
    expect(line).toContain("model.embed_tokens.weight");
    expect(line).toContain(`[${rows}, 24]`);
    expect(line).toContain("[256, 24]");
  }, 300_000);
});

describe("sharded directories: the index is checked against the shards first", () => {
  function sharded(name: string, extra: Record<string, string>): string {
    const d = join(ROOT, name);
    mkdirSync(d);
    writeFileSync(join(d, "config.json"), JSON.stringify(HF));
    copyFileSync(join(BASE, "model.safetensors"), join(d, "model-00001-of-00001.safetensors"));
    const r = SafetensorsReader.open(join(d, "model-00001-of-00001.safetensors"));
    const weight_map: Record<string, string> = Object.fromEntries(r.names().map((n) => [n, "model-00001-of-00001.safetensors"]));
    r.close();
    writeFileSync(join(d, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: { ...weight_map, ...extra } }));
    return d;
  }

  test("an index naming a shard that does not exist", () => {
    const d = sharded("missing-shard", { "model.norm.weight": "model-00002-of-00002.safetensors" });
    const line = oneLine(evalOf(d));
    expect(line).toContain("model-00002-of-00002.safetensors");
    expect(line).toContain("does not exist");
  }, 300_000);

  test("an index entry its shard does not hold", () => {
    const d = sharded("ghost-entry", { "ghost.weight": "model-00001-of-00001.safetensors" });
    const line = oneLine(evalOf(d));
    expect(line).toContain("ghost.weight");
  }, 300_000);
});

describe("config files that are not regular files: exit 2, no blocking read", () => {
  test("config.json of a --from directory, and --config, as a FIFO or a directory", () => {
    const d = join(ROOT, "cfg-fifo");
    mkdirSync(d);
    copyFileSync(join(BASE, "model.safetensors"), join(d, "model.safetensors"));
    expect(Bun.spawnSync(["mkfifo", join(d, "config.json")]).exitCode).toBe(0);
    expect(oneLine(evalOf(d))).toContain(`${join(d, "config.json")}: not a regular file (a FIFO)`);
    const fifo = join(ROOT, "job-fifo.json");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    const w = join(BASE, "model.safetensors");
    expect(oneLine(cli("eval", ["--from", w, "--config", fifo]))).toContain(`${fifo}: not a regular file (a FIFO)`);
    const dir = join(ROOT, "job-dir.json");
    mkdirSync(dir);
    expect(oneLine(cli("eval", ["--from", w, "--config", dir]))).toContain(`${dir}: not a regular file (a directory)`);
  }, 300_000);
});

describe("a checkpoint whose manifest (re-signed) holds an invalid model config", () => {
  /** Re-sign an edited manifest by the documented rule (docs/checkpoints.md): SHA-256 of the text
   * with the 64 digits of manifest_sha256 replaced by zeros. Independent of manifest.ts. */
  function resign(text: string): string {
    const zero = text.replace(/("manifest_sha256": ?")[0-9a-f]{64}"/, `$1${"0".repeat(64)}"`);
    const digest = new Bun.CryptoHasher("sha256").update(zero).digest("hex");
    return zero.replace(/("manifest_sha256": ?")0{64}"/, `$1${digest}"`);
  }

  test("num_attention_heads 0 or hidden_size \"24\": exit 2 naming manifest.json and the key (eval ran with heads 0)", () => {
    const ckpt = join(ROOT, "ckpt");
    const job = join(ROOT, "job.json");
    writeFileSync(job, JSON.stringify({
      model: HF, data: { dataset: TEXT, tokenizer: "byte", seq_len: 16 }, steps: 1, eval_interval: 0, backend: "cpu",
      train_micro_batch_size_per_gpu: 1, optimizer: { type: "AdamW", params: { lr: 1e-3 } }, checkpoint: { dir: ckpt, save_interval: 1, keep_last: 1 },
    }));
    const tr = Bun.spawnSync(["bun", join(CLI, "train.ts"), "--config", job], { env: { ...process.env, CI: "1" }, timeout: 300_000 });
    expect(tr.exitCode, tr.stderr.toString()).toBe(0);
    const manifest = join(ckpt, "global_step1", "manifest.json");
    const good = readFileSync(manifest, "utf8");
    expect(evalOf(ckpt).code).toBe(0);
    for (const [key, value, expected] of [["num_attention_heads", 0, "num_attention_heads"], ["hidden_size", "24", "hidden_size"]] as const) {
      const m = JSON.parse(good);
      m.config.model[key] = value;
      writeFileSync(manifest, resign(JSON.stringify(m, null, 2)));
      const err = badInput(evalOf(ckpt));
      expect(err).toContain(manifest);
      expect(err).toContain(`config.model.${expected}`);
    }
    // a key given twice (JSON.parse kept the last): refused naming it
    const twice = resign(good.replace(`"world_size": `, `"world_size": 7, "world_size": `));
    expect(twice).not.toBe(good);
    writeFileSync(manifest, twice);
    expect(oneLine(evalOf(ckpt))).toContain(`${manifest}: key "world_size" is given twice`);
    // no units at all: zero-to-fp32 wrote an empty export (exit 0)
    const m = JSON.parse(good);
    m.units = [];
    writeFileSync(manifest, resign(JSON.stringify(m, null, 2)));
    const z = Bun.spawnSync(["bun", join(CLI, "zero-to-fp32.ts"), ckpt, join(ROOT, "empty.safetensors")], { timeout: 300_000 });
    const line = oneLine({ code: z.exitCode, stderr: z.stderr.toString() });
    expect(line).toContain(`${manifest}: field units: expected a non-empty array`);
    writeFileSync(manifest, good);
  }, 300_000);
});

describe("config.json: sizes are bounded before the model is built", () => {
  test("num_hidden_layers 1e9 (training's limit is 4096): exit 2 naming the key, no hang", () => {
    const err = badInput(evalOf(withConfig("layers-1e9", { num_hidden_layers: 1e9 })));
    expect(err).toContain(join(ROOT, "layers-1e9", "config.json"));
    expect(err).toContain("num_hidden_layers: 1000000000 is above the supported maximum 4096");
  }, 300_000);

  // hidden_size and max_position_embeddings past what the engine can index are refused by the
  // model bounds (config/model-bounds, 77cf61e) naming the key and its range, before the memory
  // estimate or the KV cache is reached; values inside the bounds still reach those two guards.
  test("hidden_size 1e12: exit 2 naming the key and its range, nothing allocated", () => {
    const err = badInput(evalOf(withConfig("hidden-1e12", { hidden_size: 1e12 })));
    expect(err).toContain(join(ROOT, "hidden-1e12", "config.json"));
    expect(err).toContain("hidden_size: out of range: expected integer in [1, 2147483647], got 1000000000000");
    expect(err).not.toContain("cpu alloc");
  }, 300_000);

  test("hidden_size 2^20 (inside the bounds): exit 2 naming the size and the memory, no allocation attempted", () => {
    const line = oneLine(evalOf(withConfig("hidden-2p20", { hidden_size: 2 ** 20 })));
    expect(line).toContain("hidden-2p20");
    expect(line).toMatch(/parameters need [\d.]+ [GT]B/);
    expect(line).not.toContain("cpu alloc");
  }, 300_000);

  test("max_position_embeddings 1e12: exit 2 naming the key and its range", () => {
    const r = cli("generate", ["--from", withConfig("maxpos-1e12", { max_position_embeddings: 1e12 }), "--prompt", "true places", "--max-new-tokens", "12"]);
    const err = badInput(r);
    expect(err).toContain(join(ROOT, "maxpos-1e12", "config.json"));
    expect(err).toContain("max_position_embeddings: out of range: expected integer in [1, 16777216], got 1000000000000");
  }, 300_000);

  test("max_position_embeddings 2^24 (the bound): generate sizes its KV cache to the prompt and new tokens, same text", () => {
    const huge = withConfig("maxpos-2p24", { max_position_embeddings: 2 ** 24 });
    const args = ["--prompt", "true places", "--max-new-tokens", "12"];
    const a = cli("generate", ["--from", BASE, ...args]);
    const b = cli("generate", ["--from", huge, ...args]);
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    expect(b.stdout).toBe(a.stdout);
  }, 300_000);
});
