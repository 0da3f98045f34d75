/**
 * The expert-parallel route and the DeepSpeed-option gate on the auto-selected backend (webgpu
 * through wgpu-native where a device works — here Mesa's lavapipe — else cpu): world 2, ep_size 2,
 * ZeRO-3, 2 steps, against the cpu single-rank run. Different kernels sum in another order, so the
 * stated tolerance is max |Δθ| ≤ 1e-4 and losses within 1e-5; with capacity drops the dropped
 * pairs of the first step equal the cpu run's; a forced routing that leaves one rank's experts
 * without rows (empty exchange buffers on the device) works too.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { launch } from "@zeromoe/core/launch";
import { TRAIN_ENTRY, tinyMoeJob, type RunOut } from "./fixtures/train-entry.ts";

describe("EP route and gate on the auto-selected backend", async () => {
  const steps = 2;
  const drops = { drop_tokens: true, capacity_factor: 0.8, min_capacity: 1, aux_loss: "gshard", z_loss_coef: 0.01 };
  const zero3 = { stage: 3, stage3_param_persistence_threshold: 0 };
  const base = (await launch<RunOut[]>({ worldSize: 1, entry: TRAIN_ENTRY, args: { runs: [
    { job: tinyMoeJob({ gradient_accumulation_steps: 2 }), steps },
    { job: tinyMoeJob({ gradient_accumulation_steps: 2, moe: drops }), steps },
    { job: tinyMoeJob({ gradient_accumulation_steps: 2 }), steps, forced: true },
  ] } }))[0]!;
  const res = await launch<RunOut[]>({ worldSize: 2, entry: TRAIN_ENTRY, args: { runs: [
    { job: tinyMoeJob({ moe: { ep_size: 2 }, zero_optimization: zero3 }), steps, auto: true },
    { job: tinyMoeJob({ moe: { ep_size: 2, ...drops }, zero_optimization: zero3 }), steps, auto: true },
    { job: tinyMoeJob({ moe: { ep_size: 2 }, zero_optimization: zero3 }), steps, auto: true, forced: true },
  ] } }) as unknown as RunOut[][];
  for (const [i, name] of [[0, "no drops"], [1, "capacity drops, gshard aux, z-loss"], [2, "forced routing (step 0: rank 1's experts get no rows)"]] as const) {
    test(`world 2, ep_size 2, ZeRO-3, ${name}: within 1e-4 of the cpu single-rank run (backend: ${res[0]![i]!.backend})`, () => {
      const m: Record<string, number[]> = {};
      for (const r of res) Object.assign(m, r[i]!.params);
      let d = 0;
      for (const [k, v] of Object.entries(base[i]!.params)) for (let j = 0; j < v.length; j++) d = Math.max(d, Math.abs(v[j]! - m[k]![j]!));
      expect(d).toBeLessThan(1e-4);
      for (let s = 0; s < steps; s++) expect(Math.abs(res[0]![i]!.losses[s]! - base[i]!.losses[s]!)).toBeLessThan(1e-5);
      expect(res[0]![i]!.stats[0]!.layers.map((l) => [l.counts, l.dropped])).toEqual(base[i]!.stats[0]!.layers.map((l) => [l.counts, l.dropped]));
    });
  }
});
