/**
 * Optimizer offload to host memory reproduces the device optimizer bit for bit on the cpu backend:
 * the host AdamW is the cpu backend's fused kernel operation for operation (src/host-adamw.ts), the
 * gradients and the clipping coefficient are the engine's, and splitting a unit over threads does
 * not change an elementwise update. So for every world size (1, 2, 4), ZeRO stage (1, 2, 3), with
 * MoE at ep_size 2, and with bf16, the parameters and losses after 3 steps equal the run without
 * offload exactly; the device holds no `optim` bytes and the host holds 12 bytes per optimizer
 * element (master, m, v).
 */
import { describe, expect, test } from "bun:test";
import { launch } from "@zeromoe/core/launch";
import { FIXTURE_ENTRY, tinyJob, tinyModel, type TrainOut } from "@zeromoe/core/testing";

const STEPS = 3;

function job(stage: number, offload: boolean, over: Record<string, unknown> = {}): Record<string, unknown> {
  return tinyJob({
    gradient_accumulation_steps: 2,
    gradient_clipping: 1.0,
    zero_optimization: { stage, stage3_param_persistence_threshold: 0, ...(offload ? { offload_optimizer: { device: "cpu" } } : {}) },
    ...over,
  });
}

for (const world of [1, 2, 4]) {
  describe(`optimizer offload to cpu, world ${world}`, async () => {
    const runs: { label: string; job: Record<string, unknown>; steps: number }[] = [];
    const cases: { label: string; over: Record<string, unknown> }[] = [{ label: "dense ep 1", over: {} }];
    if (world >= 2) cases.push({ label: "moe ep_size 2", over: { model: { ...tinyModel(), num_local_experts: 4 }, moe: { ep_size: 2 } } });
    if (world === 2) cases.push({ label: "bf16", over: { bf16: { enabled: true } } });
    for (const c of cases) for (const stage of [1, 2, 3]) for (const off of [false, true]) {
      runs.push({ label: `${c.label} stage ${stage} ${off ? "offload" : "device"}`, job: job(stage, off, c.over), steps: STEPS });
    }
    const outs = await launch<TrainOut[]>({ worldSize: world, entry: FIXTURE_ENTRY, args: { runs } });
    for (let i = 0; i < runs.length; i += 2) {
      const label = runs[i + 1]!.label;
      test(label, () => {
        for (let r = 0; r < world; r++) {
          const dev = outs[r]![i]!;
          const off = outs[r]![i + 1]!;
          expect(off.owners.offload).toBe("offload");
          expect(off.losses).toEqual(dev.losses);
          expect(off.gradNorms).toEqual(dev.gradNorms);
          expect(Object.keys(off.params).sort()).toEqual(Object.keys(dev.params).sort());
          for (const [k, v] of Object.entries(dev.params)) expect(off.params[k]).toEqual(v);
          expect(dev.memory.current.optim ?? 0).toBeGreaterThan(0);
          expect(off.memory.current.optim ?? 0).toBe(0);
          expect(off.memory.peak.optim ?? 0).toBe(0);
        }
        expect(outs[0]![i + 1]!.losses.every((l) => Number.isFinite(l))).toBe(true);
      });
    }
  });
}
