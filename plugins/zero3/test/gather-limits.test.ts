/**
 * ZeRO-3 gathering under DeepSpeed's limits (plugins/zero3/src/gatherer.ts): the `gathered` memory
 * PEAK (backend accounting, bytes) stays within `stage3_max_live_parameters +
 * stage3_prefetch_bucket_size` elements of the parameter dtype, with limits small enough to bind
 * (the whole model is Ψ = 18675 elements; unlimited, the peak is all of it); the policy changes
 * only what is resident, never the arithmetic (results bit-identical to the unlimited run); and
 * `stage3_max_reuse_distance: 0` releases every unit after each use (2 gathers per unit per step).
 *
 * 16-bit parameters: the bound holds in bytes of the 16-bit type, 2·(max_live + prefetch). The f32
 * working copy a unit makes while in use (core/src/nn/unit.ts `materialize`) is a compute temporary
 * tagged `activation`, not a gathered parameter.
 */
import { beforeAll, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { AWKWARD_NUMEL, awkwardModel, FIXTURE_ENTRY, launch, tinyJob, type TrainArgs, type TrainOut } from "@zeromoe/core/testing";

const HEAD_NUMEL = 6450; // the largest unit: max_live equal to it still lets every unit be gathered
const UNITS = 10; // embed, 2 layers, 6 experts, head
const STEPS = 3;
/** [max_live, prefetch, reuse distance] */
const LIMITS: [number, number, number][] = [
  [6500, 1400, 1e9],
  [7000, 3000, 1e9],
  [HEAD_NUMEL, 0, 1e9],
  [1e9, 5e7, 0],
  [1e9, 5e7, 1e9],
];

function job(bf16: boolean, [live, prefetch, reuse]: [number, number, number]): Record<string, unknown> {
  return tinyJob({
    model: awkwardModel(),
    bf16: { enabled: bf16 },
    zero_optimization: {
      stage: 3, stage3_param_persistence_threshold: 0, stage3_max_live_parameters: live,
      stage3_prefetch_bucket_size: prefetch, stage3_max_reuse_distance: reuse,
    },
  });
}

const res: Record<number, TrainOut[][]> = {};

beforeAll(async () => {
  for (const n of [2, 3]) {
    const runs: TrainArgs[] = [];
    for (const bf16 of [false, true]) for (const l of LIMITS) runs.push({ job: job(bf16, l), steps: STEPS, label: `${bf16}` });
    res[n] = await launch<TrainOut[]>({ worldSize: n, entry: FIXTURE_ENTRY, args: { runs } });
  }
}, 300_000);

describe("zero3 gather limits", () => {
  for (const n of [2, 3]) {
    test(`world ${n}, fp32: gathered peak ≤ 4·(max_live + prefetch) bytes; the limits bind; results unchanged`, () => {
      const unlimited = res[n]![0]![LIMITS.length - 1]!;
      expect(unlimited.memory.peak.gathered).toBe(4 * AWKWARD_NUMEL);
      for (let rank = 0; rank < n; rank++) {
        LIMITS.slice(0, 3).forEach(([live, prefetch], i) => {
          const r = res[n]![rank]![i]!;
          const bound = 4 * (live + prefetch);
          expect(r.memory.peak.gathered).toBeLessThanOrEqual(bound);
          expect(bound).toBeLessThan(unlimited.memory.peak.gathered!);
          expect(r.gatherStats!.peakLiveElements).toBeLessThanOrEqual(live + prefetch);
          expect(r.memory.current.gathered).toBe(0);
          expect(r.params).toEqual(res[n]![rank]![LIMITS.length - 1]!.params);
          expect(r.losses).toEqual(unlimited.losses);
        });
      }
    });

    test(`world ${n}, bf16: gathered peak ≤ 2·(max_live + prefetch) bytes`, () => {
      for (let rank = 0; rank < n; rank++) {
        LIMITS.slice(0, 3).forEach(([live, prefetch], i) => {
          const r = res[n]![rank]![LIMITS.length + i]!;
          expect(r.label).toBe("true");
          expect(r.gatherStats!.peakLiveElements).toBeLessThanOrEqual(live + prefetch);
          expect(r.memory.peak.gathered).toBeLessThanOrEqual(2 * (live + prefetch));
          expect(2 * (live + prefetch)).toBeLessThan(2 * AWKWARD_NUMEL);
          expect(r.params).toEqual(res[n]![rank]![2 * LIMITS.length - 1]!.params);
        });
      }
    });

    test(`world ${n}: stage3_max_reuse_distance 0 gathers every unit twice per step (forward and backward)`, () => {
      const r0 = res[n]![0]![LIMITS.length - 2]!;
      expect(r0.gatherStats!.fetches).toBe(2 * UNITS * STEPS);
      expect(r0.calls.all_gather).toBe(2 * UNITS * STEPS);
      // with the default reuse distance the head is kept from its forward to its backward
      const keep = res[n]![0]![LIMITS.length - 1]!;
      expect(keep.gatherStats!.fetches).toBeLessThan(2 * UNITS * STEPS);
    });
  }
});
