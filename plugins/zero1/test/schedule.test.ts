/**
 * zero1 (plugins/zero1/src/index.ts): optimizer states sharded, gradients and parameters whole.
 * Gradients accumulate locally over the micro-batches and are reduce_scattered ONCE per step (per
 * unit, after the last micro-batch), then updated shards are all_gathered once per unit; the result
 * equals plain data parallelism bit for bit, at any accumulation (same summation order: local
 * accumulation, then one collective summing ranks in fixed order).
 */
import { beforeAll, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { awkwardModel, FIXTURE_ENTRY, launch, tinyJob, type TrainArgs, type TrainOut } from "@zeromoe/core/testing";

const UNITS = 10;
const STEPS = 2;

let res: TrainOut[][] = [];

beforeAll(async () => {
  const runs: TrainArgs[] = [];
  for (const accum of [1, 3]) for (const stage of [0, 1]) runs.push({ job: tinyJob({ model: awkwardModel(), gradient_accumulation_steps: accum, zero_optimization: { stage } }), steps: STEPS });
  res = await launch<TrainOut[]>({ worldSize: 2, entry: FIXTURE_ENTRY, args: { runs } });
}, 300_000);

describe("zero1 schedule", () => {
  test("one reduce_scatter and one all_gather per unit per step, whatever the accumulation", () => {
    for (const i of [1, 3]) {
      const r = res[0]![i]!;
      expect(r.calls.reduce_scatter).toBe(UNITS * STEPS);
      expect(r.calls.all_gather).toBe(UNITS * STEPS);
      expect(r.owners.partition).toBe("zero1");
      expect(r.owners.reduce).toBe("zero1");
    }
  });

  test("equals data parallelism bit for bit at accumulation 1 and 3", () => {
    for (const rank of [0, 1]) {
      for (const [dp, z1] of [[0, 1], [2, 3]]) {
        expect(res[rank]![z1]!.params).toEqual(res[rank]![dp]!.params);
        expect(res[rank]![z1]!.losses).toEqual(res[rank]![dp]!.losses);
      }
    }
  });

  test("optimizer states are sharded, gradients are not", () => {
    const [dp, z1] = [res[0]![0]!, res[0]![1]!];
    expect(z1.memory.current.grad).toBe(dp.memory.current.grad);
    expect(z1.memory.current.param).toBe(dp.memory.current.param);
    const z1r1 = res[1]![1]!;
    // the two shards' real elements add up to the whole optimizer state of data parallelism
    expect(z1.memory.current.optim! - z1.padByTag.optim + z1r1.memory.current.optim! - z1r1.padByTag.optim).toBe(dp.memory.current.optim!);
    expect(z1.memory.current.optim!).toBeLessThan(dp.memory.current.optim!);
  });
});
