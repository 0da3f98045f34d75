/**
 * qwen2_moe end to end through the CLI: a save_pretrained-style directory (the fixture's config
 * with vocab 256 for the byte tokenizer, its Transformers 5 fused state dict with the embedding
 * and LM head tiled to 256 rows) trains with `--init-from DIR` at world 2, ZeRO-2, with the AutoEP
 * block (autoep_size 2, preset qwen2_moe): AutoEP finds both MoE blocks (shared experts included),
 * every stored tensor is used, exit 0; has_shared_experts false is refused naming the key (exit 2).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadStateDict as readSafetensors } from "../../src/checkpoint/hf-load.ts";
import { saveStateDict } from "../../src/checkpoint/hf-save.ts";

const F = "core/test/fixtures/qwen2_moe";
const tmp = mkdtempSync(join(tmpdir(), "qwen2-moe-train-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("qwen2_moe: --init-from DIR with AutoEP (CLI)", () => {
  test("world 2, ZeRO-2, autoep_size 2 trains; has_shared_experts false exits 2 naming it", async () => {
    const d = join(tmp, "q2");
    mkdirSync(d);
    const cfg = JSON.parse(await Bun.file(`${F}/config.json`).text());
    writeFileSync(join(d, "config.json"), JSON.stringify({ ...cfg, vocab_size: 256 }));
    const w = readSafetensors(`${F}/state_dict.safetensors`);
    const tile = (t: { shape: number[]; data: Float32Array | Int32Array }) => {
      const out = new Float32Array(256 * t.shape[1]!);
      for (let i = 0; i < out.length; i++) out[i] = (t.data as Float32Array)[i % t.data.length]!;
      return { shape: [256, t.shape[1]!], data: out };
    };
    saveStateDict(join(d, "model.safetensors"), [...w].map(([n, t]) => (n === "model.embed_tokens.weight" || n === "lm_head.weight" ? ([n, tile(t)] as const) : ([n, t] as const))));
    const job = join(tmp, "job.json");
    const base = { train_micro_batch_size_per_gpu: 1, data: { seq_len: 16 }, steps: 2, zero_optimization: { stage: 2 } };
    writeFileSync(job, JSON.stringify({ ...base, expert_parallel: { enabled: true, autoep_size: 2, preset_model: "qwen2_moe" } }));
    const run = () => {
      const p = Bun.spawnSync(["bun", "core/src/cli/train.ts", "--config", job, "--init-from", d, "--backend", "cpu", "--world-size", "2"], { stdout: "pipe", stderr: "pipe" });
      return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
    };
    const ok = run();
    expect(ok.out).toContain("autoep: preset qwen2_moe: 2 MoE blocks (model.layers.0.mlp, model.layers.1.mlp)");
    expect(ok.out).toContain("moe        ep_size 2");
    expect(ok.out).not.toContain("not used by");
    expect(ok.code).toBe(0);
    writeFileSync(job, JSON.stringify({ ...base, expert_parallel: { enabled: true, autoep_size: 2, has_shared_experts: false } }));
    const bad = run();
    expect(bad.code).toBe(2);
    expect(bad.out).toContain("expert_parallel.has_shared_experts");
    expect(bad.out).not.toMatch(/\n\s+at /);
  }, 300_000);
});
