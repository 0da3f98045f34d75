/**
 * A Mixtral training step with the built-in moe plugin (its gate keeps the choice on the device and
 * defers its statistics) on the webgpu backend: the forward no longer waits for the expert counts
 * (the load-balancing fractions stay on the device, nn/moe/aux-fractions.ts; the statistics' read is
 * issued without waiting, readback.ts startDeferredReads) — and the losses, gradient norms and the
 * moe plugin's per-step expert counts still equal the cpu backend's (which reads the counts), over
 * steps with 2 micro-batches of gradient accumulation. The awkward tiny Mixtral (hidden 25, vocab
 * 257, intermediate 7).
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, WebGpuBackend, type Backend } from "@zeromoe/kernels";
import { createSoloCommunicator } from "../../src/comm/solo.ts";
import { resolveJobConfig } from "../../src/config/resolve.ts";
import { Engine } from "../../src/engine/engine.ts";
import { pluginsForJob } from "../../src/engine/plugin-loader.ts";
import { microBatch } from "../../src/testing/micro-batch.ts";
import { awkwardModel, tinyJob } from "../../src/testing/tiny-jobs.ts";

const STEPS = 3;

async function train(be: Backend): Promise<{ losses: number[]; norms: number[]; counts: unknown[]; plugins: string[] }> {
  const { config } = resolveJobConfig(tinyJob({ model: awkwardModel(), world_size: 1, gradient_accumulation_steps: 2, gradient_clipping: 0.5 }));
  const plugins = await pluginsForJob(config);
  const engine = await Engine.create({ config, comm: createSoloCommunicator(), backend: be, plugins, log: () => {} });
  const losses: number[] = [];
  const norms: number[] = [];
  const counts: unknown[] = [];
  for (let s = 0; s < STEPS; s++) {
    const micros = [0, 1].map((i) => microBatch(s, i, config.train_micro_batch_size_per_gpu, config.data.seq_len, 257));
    const r = await engine.trainBatch(micros);
    losses.push(r.loss);
    norms.push(r.gradNorm);
    await engine.afterStep();
    counts.push(JSON.parse(JSON.stringify((engine.summarySections().moe as { expert_counts?: unknown })?.expert_counts ?? null)));
  }
  engine.destroy();
  return { losses, norms, counts, plugins: plugins.map((p) => p.name) };
}

describe("Mixtral step with the moe plugin on webgpu", () => {
  test("losses, gradient norms and the plugin's expert counts equal the cpu backend's", async () => {
    const gpu = (await createBackend("webgpu")).backend as WebGpuBackend;
    try {
      const c = await train(new CpuBackend());
      const g = await train(gpu);
      expect(g.plugins).toContain("moe");
      expect(c.counts[STEPS - 1]).not.toBeNull();
      expect(g.counts).toEqual(c.counts);
      for (let s = 0; s < STEPS; s++) {
        expect(Math.abs(g.losses[s]! - c.losses[s]!)).toBeLessThanOrEqual(1e-4 * c.losses[s]!);
        expect(Math.abs(g.norms[s]! - c.norms[s]!)).toBeLessThanOrEqual(1e-3 * c.norms[s]!);
      }
    } finally {
      gpu.destroy();
    }
  });
});
