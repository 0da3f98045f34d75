/**
 * ZeRO-3 options that change where parameters live and when they move — persistent small units
 * (`stage3_param_persistence_threshold`), `overlap_comm`, small reduce buckets, binding prefetch and
 * live-parameter limits — never change the result: fp32 at world 4 with one micro-batch per rank is
 * bit-identical to the single rank accumulating the same 4 micro-batches (fixed reduction order,
 * docs/comm.md). Persistent units are gathered by nobody (fewer all_gathers).
 */
import { beforeAll, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { awkwardModel, FIXTURE_ENTRY, launch, tinyJob, type TrainOut } from "@zeromoe/core/testing";

const STEPS = 3;
const PERSISTENT = 2 * (1325 + 3 * 525); // layers and experts of the awkward model (< 1400 elements each)
const OPTIONS: [number, boolean][] = [
  [1400, false],
  [1400, true],
  [0, true],
];

let ref: TrainOut;
let res: TrainOut[][];

beforeAll(async () => {
  ref = (await launch<TrainOut[]>({ worldSize: 1, entry: FIXTURE_ENTRY, args: { runs: [{ job: tinyJob({ model: awkwardModel(), gradient_accumulation_steps: 4 }), steps: STEPS }] } }))[0]![0]!;
  const runs = OPTIONS.map(([threshold, overlap]) => ({
    job: tinyJob({
      model: awkwardModel(),
      zero_optimization: {
        stage: 3, stage3_param_persistence_threshold: threshold, overlap_comm: overlap, reduce_bucket_size: 2000,
        stage3_prefetch_bucket_size: 3000, stage3_max_live_parameters: 7000,
      },
    }),
    steps: STEPS,
  }));
  res = await launch<TrainOut[]>({ worldSize: 4, entry: FIXTURE_ENTRY, args: { runs } });
}, 300_000);

describe("zero3 options keep the arithmetic", () => {
  OPTIONS.forEach(([threshold, overlap], i) => {
    test(`persistence threshold ${threshold}, overlap_comm ${overlap}: bit-identical to world 1`, () => {
      for (const rank of res) {
        expect(rank[i]!.params).toEqual(ref.params);
        expect(rank[i]!.losses).toEqual(ref.losses);
        expect(rank[i]!.replicatedNumel).toBe(threshold > 0 ? PERSISTENT : 0);
      }
    });
  });

  test("persistent units are never gathered: fewer all_gathers", () => {
    expect(res[0]![0]!.calls.all_gather!).toBeLessThan(res[0]![2]!.calls.all_gather!);
    expect(res[0]![0]!.gatherStats!.fetches).toBeLessThan(res[0]![2]!.gatherStats!.fetches);
  });
});
