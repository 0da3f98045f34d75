/**
 * A training step of a dense model on the webgpu backend (world 1, ZeRO 0 and 1) does only the host
 * reads issue 11 allows — structural, counted by `WebGpuBackend.stats()`, never timed:
 *
 * - one read per step (the micro-batches' losses together with the optimizer's [scale, skip, Σ]:
 *   the clip coefficient stays on the device and AdamW reads it there, engine.ts / optimizer.ts),
 * - no wait for an idle queue, and no GPU buffer created once the first steps have filled the pool.
 *
 * The device path must compute what the host path computes: the losses and gradient norms of the
 * same job on the cpu backend (host path, float64 clip arithmetic) agree to f32 rounding, with a
 * clip threshold low enough that clipping is active on every step.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, WebGpuBackend, type Backend } from "@zeromoe/kernels";
import { createSoloCommunicator } from "../../src/comm/solo.ts";
import { resolveJobConfig } from "../../src/config/resolve.ts";
import { Engine } from "../../src/engine/engine.ts";
import { pluginsForJob } from "../../src/engine/plugin-loader.ts";
import { microBatch } from "../../src/testing/micro-batch.ts";
import { tinyJob, tinyLlamaModel } from "../../src/testing/tiny-jobs.ts";

const STEPS = 4;

async function train(be: Backend, stage: number, accum: number, bf16: boolean): Promise<{ losses: number[]; norms: number[]; perStep: { reads: number; waits: number; created: number }[] }> {
  const job = tinyJob({
    model: { ...tinyLlamaModel(), num_hidden_layers: 2, hidden_size: 24, intermediate_size: 37 },
    world_size: 1,
    gradient_accumulation_steps: accum,
    gradient_clipping: 0.05,
    zero_optimization: { stage },
    bf16: { enabled: bf16 },
  });
  const { config } = resolveJobConfig(job);
  const engine = await Engine.create({ config, comm: createSoloCommunicator(), backend: be, plugins: await pluginsForJob(config), log: () => {} });
  const losses: number[] = [];
  const norms: number[] = [];
  const perStep: { reads: number; waits: number; created: number }[] = [];
  for (let s = 0; s < STEPS; s++) {
    const before = be instanceof WebGpuBackend ? be.stats() : null;
    const micros = Array.from({ length: accum }, (_, i) => microBatch(s, i, config.train_micro_batch_size_per_gpu, config.data.seq_len, 256));
    const r = await engine.trainBatch(micros);
    losses.push(r.loss);
    norms.push(r.gradNorm);
    if (before) {
      const after = (be as WebGpuBackend).stats();
      perStep.push({ reads: after.reads - before.reads, waits: after.waits - before.waits, created: after.buffersCreated - before.buffersCreated });
    }
  }
  engine.destroy();
  return { losses, norms, perStep };
}

describe("host reads of a dense training step on webgpu (world 1)", () => {
  for (const [stage, accum, bf16] of [[0, 1, false], [1, 3, false], [0, 2, true]] as const) {
    test(`ZeRO ${stage}, ${accum} micro-batch${accum > 1 ? "es" : ""}${bf16 ? ", bf16" : ""}: one read per step, no queue wait; losses and norms match the cpu backend`, async () => {
      const gpu = (await createBackend("webgpu")).backend as WebGpuBackend;
      try {
        const g = await train(gpu, stage, accum, bf16);
        const c = await train(new CpuBackend(), stage, accum, bf16);
        for (const p of g.perStep) {
          expect(p.reads).toBe(1);
          expect(p.waits).toBe(0);
        }
        // the pool serves every allocation once the first step has run
        for (const p of g.perStep.slice(2)) expect(p.created).toBe(0);
        const tol = bf16 ? 2e-2 : 1e-4;
        for (let s = 0; s < STEPS; s++) {
          expect(Math.abs(g.losses[s]! - c.losses[s]!)).toBeLessThanOrEqual(tol * Math.abs(c.losses[s]!));
          expect(Math.abs(g.norms[s]! - c.norms[s]!)).toBeLessThanOrEqual(tol * Math.abs(c.norms[s]!));
          expect(c.norms[s]!).toBeGreaterThan(0.05); // clipping is active: the device's clip coefficient < 1 is exercised
        }
      } finally {
        gpu.destroy();
      }
    }, 300_000);
  }
});
