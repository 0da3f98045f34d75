/**
 * The peak estimate (core/src/train/memory-peak.ts) against the measured peak: the backend's
 * accounted `peak_total` of real runs of the train CLI on the cpu backend (dense and MoE, fp32 and
 * bf16, ZeRO 0 and ZeRO-3 over 2 ranks, activation checkpointing on and off, expert tensor
 * parallelism etp_size 2), within 10 % (the
 * issue's bound; observed within 0.3 % on cpu and 3 % on lavapipe). And the refusal: a
 * `max_device_memory` above the model states but below the estimated peak exits 2 before the data
 * is loaded, naming the estimate and a change that fits.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { resolveJobConfig } from "../../src/config/resolve.ts";
import { loadJobPlugins } from "../../src/train/job-plugins.ts";
import { estimateModelState } from "../../src/train/memory-estimate.ts";
import { estimatePeak } from "../../src/train/memory-peak.ts";

const CLI = resolve(import.meta.dir, "../../src/cli/train.ts");
const dir = mkdtempSync(join(tmpdir(), "zeromoe-peak-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const base = (model: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  model: { vocab_size: 263, hidden_size: 64, intermediate_size: 172, num_hidden_layers: 3, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 256, ...model },
  data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 127 },
  backend: "cpu", steps: 2, eval_interval: 0, train_micro_batch_size_per_gpu: 5,
  optimizer: { type: "AdamW", params: { lr: 1e-3 } },
  ...extra,
});
const MIX = { model_type: "mixtral", num_local_experts: 5, num_experts_per_tok: 2, intermediate_size: 96 };
const Z3 = { world_size: 2, zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0 } };

async function estimate(raw: Record<string, unknown>) {
  const { config } = resolveJobConfig(raw);
  return estimatePeak(config, estimateModelState(config, (await loadJobPlugins(config)).plugins), "cpu");
}

async function measured(name: string, raw: Record<string, unknown>): Promise<number> {
  const job = join(dir, `${name}.json`);
  const sum = join(dir, `${name}-summary.json`);
  writeFileSync(job, JSON.stringify(raw));
  const p = Bun.spawn(["bun", CLI, "--config", job, "--summary", sum], { stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
  const [, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  expect(err).toBe("");
  expect(code).toBe(0);
  return JSON.parse(readFileSync(sum, "utf8")).memory.per_rank[0].peak_total;
}

describe("peak memory estimate", () => {
  for (const [name, raw] of [
    ["llama-fp32-z0", base({ model_type: "llama" })],
    ["llama-fp32-z0-ckpt", base({ model_type: "llama" }, { activation_checkpointing: { enabled: true } })],
    ["llama-bf16-z3", base({ model_type: "llama" }, { bf16: { enabled: true }, ...Z3 })],
    ["mixtral-bf16-z0-ckpt", base(MIX, { bf16: { enabled: true }, activation_checkpointing: { enabled: true } })],
    ["mixtral-bf16-z3", base(MIX, { bf16: { enabled: true }, ...Z3 })],
    ["mixtral-fp32-z0-etp2", base(MIX, { world_size: 2, moe: { etp_size: 2 } })],
    ["mixtral-bf16-z3-etp2", base(MIX, { bf16: { enabled: true }, ...Z3, moe: { etp_size: 2 } })],
    ["qwen3-bf16-z0", base({ model_type: "qwen3_moe", num_local_experts: 7, num_experts_per_tok: 3, moe_intermediate_size: 40, head_dim: 16, intermediate_size: 100 }, { bf16: { enabled: true } })],
  ] as [string, Record<string, unknown>][]) {
    test(`${name}: within 10 % of the measured peak_total`, async () => {
      const est = await estimate(raw);
      const meas = await measured(name, raw);
      expect(est.peak.bytes / meas).toBeGreaterThan(0.9);
      expect(est.peak.bytes / meas).toBeLessThan(1.1);
      expect(est.peak.bytes).toBeGreaterThan(est.modelStates * 1.5); // activations are a real part here
    }, 300_000);
  }

  test("max_device_memory below the estimated peak (above the model states): exit 2 before the data, naming the estimate and a fix", async () => {
    const raw = base({ model_type: "llama" });
    const est = await estimate(raw);
    const budget = Math.floor((est.modelStates + est.peak.bytes) / 2);
    const job = join(dir, "refuse.json");
    writeFileSync(job, JSON.stringify(raw));
    const p = Bun.spawn(["bun", CLI, "--config", job, "--max-device-memory", String(budget)], { stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
    const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    expect(code).toBe(2);
    expect(err).toMatch(/the training step needs an estimated [\d.]+ MiB \(\d+ bytes\) per rank at its peak \(backward layer 2\): model states/);
    expect(err).toMatch(/Would fit: (train_micro_batch_size_per_gpu 1 with gradient_accumulation_steps 5|activation_checkpointing)/);
    expect(err).not.toMatch(/^\s+at /m);
    expect(out).not.toMatch(/^data +moby-dick: \d+ tokens/m); // the DataLoader never ran
  }, 300_000);
});
