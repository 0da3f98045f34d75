/**
 * Communication volume per rank per step (ZeRO paper §7; docs/domain.md §2), read from the
 * communicator's accounting (core/src/comm: bytes sent per collective by the ring definitions,
 * all_reduce 2(n−1)/n·B, reduce_scatter and all_gather (n−1)/n·B).
 *
 * Bytes are turned into elements by the dtype of the gradients/parameters (4 for fp32, 2 for bf16)
 * and into the paper's units by the factor n/(n−1): the paper's "2Ψ" for data parallelism is an
 * all_reduce of Ψ elements, i.e. 2(n−1)/n·Ψ elements sent. Expected, per rank per step:
 * data parallel (stage 0) ≈ 2Ψ (all_reduce); stages 1 and 2 ≈ 2Ψ (reduce_scatter + all_gather of
 * updated parameters); stage 3 with `stage3_param_persistence_threshold: 0` and
 * `stage3_max_reuse_distance: 0` ≈ 3Ψ (all_gather in forward, all_gather in backward,
 * reduce_scatter), i.e. 1.5× data parallel. "≈": within 5% — shard padding and the two small f64
 * all_reduces per step (loss and gradient norm) are counted too.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { launch } from "../../src/launch/index.ts";
import { AWKWARD_NUMEL, awkwardModel, FIXTURE_ENTRY, tinyJob, type TrainArgs, type TrainOut } from "./fixtures.ts";

const STEPS = 2;
const CASES: { n: number; bf16: boolean }[] = [
  { n: 2, bf16: false },
  { n: 3, bf16: false },
  { n: 4, bf16: false },
  { n: 4, bf16: true },
];

function job(stage: number, bf16: boolean): Record<string, unknown> {
  return tinyJob({
    model: awkwardModel(),
    bf16: { enabled: bf16 },
    zero_optimization: { stage, stage3_param_persistence_threshold: 0, stage3_max_reuse_distance: 0, reduce_bucket_size: 4000 },
  });
}

/** Elements per rank per step in the paper's units (see the module comment), summed over ops. */
function paperElements(r: TrainOut, n: number, bf16: boolean, ops?: string[]): number {
  const bytes = Object.entries(r.comm).filter(([k]) => !ops || ops.includes(k)).reduce((s, [, v]) => s + v, 0);
  return (bytes / (bf16 ? 2 : 4)) * (n / (n - 1)) / STEPS;
}

const res = new Map<string, TrainOut[]>();

beforeAll(async () => {
  for (const n of [2, 3, 4]) {
    const runs: TrainArgs[] = [];
    for (const c of CASES.filter((c) => c.n === n)) for (const s of [0, 1, 2, 3]) runs.push({ job: job(s, c.bf16), steps: STEPS, label: `${s}` });
    const out = await launch<TrainOut[]>({ worldSize: n, entry: FIXTURE_ENTRY, args: { runs } });
    for (const c of CASES.filter((c) => c.n === n)) res.set(`${n}/${c.bf16}`, out[0]!.splice(0, 4));
  }
}, 300_000);

describe("communication volume per rank per step", () => {
  for (const c of CASES) {
    test(`world ${c.n}, ${c.bf16 ? "bf16" : "fp32"}: DP ≈ 2Ψ, stages 1–2 ≈ 2Ψ, stage 3 ≈ 3Ψ (1.5× DP)`, () => {
      const [s0, s1, s2, s3] = res.get(`${c.n}/${c.bf16}`)!;
      const psi = AWKWARD_NUMEL;
      const e = [s0!, s1!, s2!, s3!].map((r) => paperElements(r, c.n, c.bf16));
      const within = (x: number, want: number) => expect(Math.abs(x / want - 1)).toBeLessThanOrEqual(0.05);
      within(e[0]! / psi, 2);
      within(e[1]! / psi, 2);
      within(e[2]! / psi, 2);
      within(e[3]! / psi, 3);
      within(e[3]! / e[0]!, 1.5);
      // the right collectives carry it
      expect(paperElements(s0!, c.n, c.bf16, ["all_reduce"]) / psi).toBeCloseTo(2, 2);
      for (const r of [s1!, s2!]) {
        within(paperElements(r, c.n, c.bf16, ["reduce_scatter"]) / psi, 1);
        within(paperElements(r, c.n, c.bf16, ["all_gather"]) / psi, 1);
      }
      within(paperElements(s3!, c.n, c.bf16, ["all_gather"]) / psi, 2);
      within(paperElements(s3!, c.n, c.bf16, ["reduce_scatter"]) / psi, 1);
      // stage 2 buckets its reduce_scatters (reduce_bucket_size 4000 < Ψ): fewer calls than units
      expect(s2!.calls.reduce_scatter).toBeLessThan(s1!.calls.reduce_scatter!);
    });
  }
});
