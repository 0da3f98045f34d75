/**
 * deepseek_v3 end to end through the CLI, with its `e_score_correction_bias` buffers: a
 * save_pretrained-style directory (the fixture's config with vocab 256, its Hub-layout weights
 * with the embedding and LM head tiled to 256 rows, the random biases) trains with
 * `--init-from DIR` at world 2, ZeRO-2 — every stored tensor used (the biases are read into the
 * routing); 4 steps vs a `--resume` from the step-2 checkpoint give bit-identical losses (the
 * biases come back from the checkpoint manifest, `plugins.model_buffers`, not from DIR); and
 * `zero-to-fp32 --max-shard-size` writes the biases unchanged next to the trained weights; `eval
 * --from` the checkpoint scores as the export does (the biases given back from the manifest).
 * Also deepseek_v2 (no buffers) trains from its directory with AutoEP autoep_size 2.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadStateDict as readSafetensors } from "../../src/checkpoint/hf-load.ts";
import { saveStateDict } from "../../src/checkpoint/hf-save.ts";

const tmp = mkdtempSync(join(tmpdir(), "deepseek-train-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A Hub directory of fixture `family` with vocab 256 (embedding and head tiled). */
async function hubDir(family: string): Promise<string> {
  const F = `core/test/fixtures/${family}`;
  const d = join(tmp, family);
  mkdirSync(d);
  const cfg = JSON.parse(await Bun.file(`${F}/config.json`).text());
  writeFileSync(join(d, "config.json"), JSON.stringify({ ...cfg, vocab_size: 256 }));
  const w = readSafetensors(`${F}/model.safetensors`);
  const tile = (t: { shape: number[]; data: Float32Array | Int32Array }) => {
    const out = new Float32Array(256 * t.shape[1]!);
    for (let i = 0; i < out.length; i++) out[i] = (t.data as Float32Array)[i % t.data.length]!;
    return { shape: [256, t.shape[1]!], data: out };
  };
  saveStateDict(join(d, "model.safetensors"), [...w].map(([n, t]) => (n === "model.embed_tokens.weight" || n === "lm_head.weight" ? ([n, tile(t)] as const) : ([n, t] as const))));
  return d;
}

const run = (args: string[]) => {
  const p = Bun.spawnSync(["bun", ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
};
const base = { train_micro_batch_size_per_gpu: 1, data: { seq_len: 16 }, eval_interval: 0, zero_optimization: { stage: 2 }, optimizer: { type: "AdamW", params: { lr: 1e-2 } } };

describe("deepseek_v3 with e_score_correction_bias (CLI)", () => {
  test("init-from reads the biases; resume restores them; zero-to-fp32 writes them", async () => {
    const d = await hubDir("deepseek_v3");
    const bias = readSafetensors("core/test/fixtures/deepseek_v3/model.safetensors").get("model.layers.2.mlp.gate.e_score_correction_bias")!;
    expect(Array.from(bias.data as Float32Array).some((v) => v !== 0)).toBe(true);
    const ck = join(tmp, "ck");
    const job = join(tmp, "v3.json");
    writeFileSync(job, JSON.stringify({ ...base, steps: 4, checkpoint: { dir: ck, save_interval: 2, keep_last: 0 } }));
    const fullSum = join(tmp, "full.json");
    const full = run(["core/src/cli/train.ts", "--config", job, "--init-from", d, "--backend", "cpu", "--world-size", "2", "--summary", fullSum]);
    expect(full.out).toContain("init-from");
    expect(full.out).not.toContain("not used by");
    expect(full.code).toBe(0);
    const job2 = join(tmp, "v3-resume.json");
    writeFileSync(job2, JSON.stringify({ ...base, model: JSON.parse(readFileSync(join(d, "config.json"), "utf8")), steps: 4 }));
    const resSum = join(tmp, "resumed.json");
    const res = run(["core/src/cli/train.ts", "--config", job2, "--resume", join(ck, "global_step2"), "--backend", "cpu", "--world-size", "2", "--summary", resSum]);
    expect(res.code).toBe(0);
    const a = JSON.parse(readFileSync(fullSum, "utf8")).losses as number[];
    const b = JSON.parse(readFileSync(resSum, "utf8")).losses as number[];
    expect(b).toEqual(a.slice(2));
    const out = join(tmp, "export");
    const z = run(["core/src/cli/zero-to-fp32.ts", ck, out, "--max-shard-size", "64KiB"]);
    expect(z.code).toBe(0);
    const all = new Map<string, number[]>();
    for (const f of readdirSync(out).filter((f) => f.endsWith(".safetensors"))) for (const [n, t] of readSafetensors(join(out, f))) all.set(n, Array.from(t.data as Float32Array));
    expect(all.get("model.layers.2.mlp.gate.e_score_correction_bias")).toEqual(Array.from(bias.data as Float32Array));
    expect(all.has("model.layers.1.mlp.gate.e_score_correction_bias")).toBe(true);
    expect(JSON.parse(readFileSync(join(out, "config.json"), "utf8")).n_routed_experts).toBe(8);
    // eval --from the checkpoint routes with the recorded biases: the same loss as the export
    // (which holds them as tensors); copying parameters only gave another loss, without a word
    const evalOf = (from: string) => {
      const e = run(["core/src/cli/eval.ts", "--from", from, "--data", "moby-dick", "--seq-len", "16", "--batch-size", "2", "--max-batches", "2", "--backend", "cpu", "--tokenizer", "byte"]);
      expect(e.code).toBe(0);
      return Number(/eval {7}loss (\d+\.\d+)/.exec(e.out)![1]);
    };
    expect(evalOf(ck)).toBe(evalOf(out));
  }, 300_000);
  test("deepseek_v2 trains from its directory with AutoEP autoep_size 2", async () => {
    const d = await hubDir("deepseek_v2");
    const job = join(tmp, "v2.json");
    writeFileSync(job, JSON.stringify({ ...base, steps: 2, expert_parallel: { enabled: true, autoep_size: 2, preset_model: "deepseek_v2", num_expert_groups: 4, num_limited_groups: 2 } }));
    const r = run(["core/src/cli/train.ts", "--config", job, "--init-from", d, "--backend", "cpu", "--world-size", "2"]);
    expect(r.out).toContain("autoep: preset deepseek_v2: 2 MoE blocks (model.layers.1.mlp, model.layers.2.mlp)");
    expect(r.out).not.toContain("not used by");
    expect(r.code).toBe(0);
  }, 300_000);
});
