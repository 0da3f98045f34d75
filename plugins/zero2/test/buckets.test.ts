/**
 * zero2's bucketed reduce_scatter (plugins/zero2/src/bucketed-reducer.ts): `reduce_bucket_size`
 * decides how many collectives run, never the arithmetic — every element is still summed over the
 * ranks in fixed rank order, so results are bit-identical for any bucket size and with or without
 * `overlap_comm`; the bytes moved are the same (plus padding, identical per unit).
 */
import { beforeAll, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { awkwardModel, FIXTURE_ENTRY, launch, tinyJob, type TrainArgs, type TrainOut } from "@zeromoe/core/testing";

const UNITS = 10; // embed, 2 layers, 6 experts, head
const STEPS = 2;
const ACCUM = 2;
const CASES: { bucket: number; overlap: boolean }[] = [
  { bucket: 1, overlap: false },
  { bucket: 1, overlap: true },
  { bucket: 3000, overlap: false },
  { bucket: 3000, overlap: true },
  { bucket: 1e9, overlap: true },
];

let res: TrainOut[] = [];

beforeAll(async () => {
  const runs: TrainArgs[] = CASES.map((c) => ({
    job: tinyJob({ model: awkwardModel(), gradient_accumulation_steps: ACCUM, zero_optimization: { stage: 2, reduce_bucket_size: c.bucket, overlap_comm: c.overlap } }),
    steps: STEPS,
  }));
  res = (await launch<TrainOut[]>({ worldSize: 3, entry: FIXTURE_ENTRY, args: { runs } }))[0]!;
}, 300_000);

describe("zero2 buckets", () => {
  test("bucket size 1: one reduce_scatter per unit per micro-batch", () => {
    expect(res[0]!.calls.reduce_scatter).toBe(UNITS * ACCUM * STEPS);
    expect(res[1]!.calls.reduce_scatter).toBe(UNITS * ACCUM * STEPS);
  });

  test("larger buckets: fewer collectives, same bytes", () => {
    const calls = res.map((r) => r.calls.reduce_scatter!);
    expect(calls[2]!).toBeLessThan(calls[0]!);
    expect(calls[4]!).toBeLessThanOrEqual(calls[2]!);
    expect(calls[4]!).toBeGreaterThanOrEqual(ACCUM * STEPS); // at least one per micro-batch
    for (const r of res) expect(r.comm.reduce_scatter).toBe(res[0]!.comm.reduce_scatter);
  });

  test("bucket size and overlap_comm do not change the result (bit-identical)", () => {
    for (const r of res.slice(1)) {
      expect(r.params).toEqual(res[0]!.params);
      expect(r.losses).toEqual(res[0]!.losses);
    }
    expect(res[0]!.losses[STEPS - 1]!).toBeLessThan(res[0]!.losses[0]!);
  });
});
