/**
 * Expert tensor parallelism (plugins/moe/src/expert-tp.ts) at world 4, ep_size 2 × etp_size 2 (and
 * world 4, ep 1 × etp 4; world 3, ep 1 × etp 3) on real concurrent ranks with the cpu backend:
 *
 * - outputs, losses and input gradients of the etp all_gather → sliced SwiGLU → reduce_scatter equal
 *   the ep-only computation (the full experts on the same rows, same backend ops) within 1e-6
 *   absolute. Not bit-identical: the down projection's sum over the intermediate dimension is split
 *   into T partial sums added afterwards, which changes f32 rounding (values here are O(1), so the
 *   differences are a few ulp, ~1e-7);
 * - the gradients of the weight slices, gathered in etp order (`gatherExpertSlices`), equal the
 *   full-weight gradient summed over the etp group's rows (every member's rows reach every slice)
 *   within 1e-6;
 * - awkward sizes: hidden 5, intermediate 6 (3 per etp rank at T 2, 2 at T 3), experts with no rows
 *   on a member (every member has some rows: its loss must reach the collectives' backward, as
 *   the engine's dense loss does);
 * - the layout, slicing and the memory formula: per-rank expert bytes counted from the slices each
 *   rank holds and the ZeRO partition of its edp group equal `etpModelStateBytes` exactly at stages
 *   0–3; bad layouts give messages naming moe.etp_size.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { launch } from "@zeromoe/core/launch";
import { checkExpertTensorParallel, etpModelStateBytes, expertSliceRange, expertTPCoords, expertTPRanks, gatherExpertSlices, sliceExpert, type HostExpertWeights } from "../src/expert-tp.ts";
import { fullExpert, type ETPArgs, type ETPOut } from "./fixtures/expert-tp-entry.ts";

const ENTRY = new URL("./fixtures/expert-tp-entry.ts", import.meta.url).pathname;
const TOL = 1e-6;

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i]! - b[i]!));
  return d;
}

const CASES: { name: string; world: number; args: ETPArgs }[] = [
  { name: "world 4, ep 2 × etp 2", world: 4, args: { epSize: 2, etpSize: 2, hidden: 5, intermediate: 6, numExperts: 4, rowsOf: [[3, 0], [2, 5], [0, 4], [1, 1]] } },
  { name: "world 4, ep 1 × etp 4, members with one expert's rows", world: 4, args: { epSize: 1, etpSize: 4, hidden: 5, intermediate: 8, numExperts: 3, rowsOf: [[2, 0, 1], [0, 1, 0], [1, 3, 2], [4, 0, 0]] } },
  { name: "world 3, ep 1 × etp 3", world: 3, args: { epSize: 1, etpSize: 3, hidden: 7, intermediate: 6, numExperts: 2, rowsOf: [[2, 3], [1, 0], [0, 2]] } },
];

describe("expert TP equals the ep-only computation", () => {
  for (const c of CASES) {
    test(c.name, async () => {
      const outs = await launch<ETPOut, ETPArgs>({ worldSize: c.world, entry: ENTRY, args: c.args, timeoutS: 300 });
      const { epSize: P, etpSize: T, hidden: H, intermediate: I } = c.args;
      let worst = 0;
      for (const o of outs) {
        worst = Math.max(worst, maxDiff(o.out, o.refOut), Math.abs(o.loss - o.refLoss), maxDiff(o.inputGrad, o.refInputGrad));
      }
      expect(worst).toBeLessThanOrEqual(TOL);
      // gradients: slices gathered over each etp group = Σ over the group's ranks of full-weight gradients
      for (let r0 = 0; r0 < c.world; r0 += T) {
        const members = Array.from({ length: T }, (_, j) => r0 + j);
        const nl = outs[r0]!.grads.length;
        for (let g = 0; g < nl; g++) {
          const gathered = gatherExpertSlices(members.map((r) => outs[r]!.grads[g]!), I, H);
          for (const k of ["w1", "w2", "w3"] as const) {
            const ref = new Float64Array(I * H);
            for (const r of members) outs[r]!.refGrads[g]![k].forEach((v, i) => (ref[i]! += v));
            expect(maxDiff(gathered[k], ref)).toBeLessThanOrEqual(TOL);
            expect(gathered[k].some((v) => v !== 0) || members.every((r) => c.args.rowsOf[r]![g] === 0)).toBe(true);
          }
        }
      }
      expect(P * T).toBe(c.world);
    }, 300_000);
  }
});

describe("layout, slicing, memory, errors", () => {
  test("groups at world 8, ep 2 × etp 2 (edp 2) and world 4, ep 2 × etp 2", () => {
    expect(expertTPRanks(0, 4, 2, 2)).toEqual({ etp: [0, 1], ep: [0, 2], edp: [0] });
    expect(expertTPRanks(3, 4, 2, 2)).toEqual({ etp: [2, 3], ep: [1, 3], edp: [3] });
    expect(expertTPRanks(5, 8, 2, 2)).toEqual({ etp: [4, 5], ep: [5, 7], edp: [1, 5] });
    expect(expertTPCoords(5, 2, 2)).toEqual({ etpRank: 1, epRank: 0 });
    // every rank is in exactly one group of each kind, and an ep × etp block covers every (slice, expert set)
    for (const [W, P, T] of [[8, 2, 2], [12, 3, 2], [6, 1, 3], [4, 4, 1]] as const) {
      const seen = new Set<string>();
      for (let r = 0; r < W; r++) {
        const g = expertTPRanks(r, W, P, T);
        for (const k of ["etp", "ep", "edp"] as const) expect(g[k]).toContain(r);
        expect(g.etp.length * g.ep.length * g.edp.length).toBe(W);
        const { etpRank, epRank } = expertTPCoords(r, P, T);
        for (const q of g.edp) expect(expertTPCoords(q, P, T)).toEqual({ etpRank, epRank });
        seen.add(`${Math.floor(r / (P * T))}:${etpRank}:${epRank}`);
      }
      expect(seen.size).toBe(W);
    }
  });

  test("slices: rows of w1/w3, columns of w2; gathering inverts slicing", () => {
    const I = 6, H = 5, T = 3;
    const f = fullExpert(2, I, H);
    const s = Array.from({ length: T }, (_, j) => sliceExpert(f, I, H, T, j));
    expect(expertSliceRange(I, T, 1)).toEqual([2, 4]);
    // slice 1: w1 rows 2, 3; w2 columns 2, 3
    expect(Array.from(s[1]!.w1)).toEqual(Array.from(f.w1.subarray(2 * H, 4 * H)));
    for (let h = 0; h < H; h++) expect([s[1]!.w2[h * 2], s[1]!.w2[h * 2 + 1]]).toEqual([f.w2[h * I + 2]!, f.w2[h * I + 3]!]);
    const g = gatherExpertSlices(s, I, H);
    for (const k of ["w1", "w2", "w3"] as const) expect(Array.from(g[k])).toEqual(Array.from(f[k]));
  });

  test("per-rank expert memory counted from the held slices equals etpModelStateBytes at stages 0–3", () => {
    // L layers × E experts, each 3·H·I; a rank holds E/P experts' 1/T slices, ZeRO-partitioned over its edp group
    const L = 3, E = 8, H = 12, I = 20, D = 1234;
    for (const [N, P, T] of [[4, 2, 2], [8, 2, 2], [8, 1, 4], [16, 2, 4], [4, 1, 1]] as const) {
      for (const stage of [0, 1, 2, 3] as const) for (const mixed of [false, true]) {
        const [a, gb, o] = mixed ? [2, 2, 12] : [4, 4, 8];
        const Ne = N / (P * T);
        for (let r = 0; r < N; r++) {
          const { etpRank, epRank } = expertTPCoords(r, P, T);
          let held = 0;
          for (let l = 0; l < L; l++) for (let e = epRank * (E / P); e < (epRank + 1) * (E / P); e++) {
            const s = sliceExpert(fullExpert(e, I, H), I, H, T, etpRank);
            held += s.w1.length + s.w2.length + s.w3.length;
          }
          const shard = held / Ne; // every slice's numel divides by N_e at these sizes (no padding)
          const counted = { params: a * (stage >= 3 ? shard : held), grads: gb * (stage >= 2 ? shard : held), optim: o * (stage >= 1 ? shard : held) };
          const f = etpModelStateBytes({ denseParams: D, expertParams: L * E * 3 * H * I, worldSize: N, epSize: P, etpSize: T, stage, mixed });
          expect(f.expert).toEqual(counted);
        }
      }
    }
  });

  test("bad layouts name moe.etp_size", () => {
    expect(checkExpertTensorParallel({ worldSize: 4, epSize: 2, etpSize: 2, intermediate: 6 })).toEqual([]);
    expect(checkExpertTensorParallel({ worldSize: 4, epSize: 2, etpSize: 3, intermediate: 6 })).toEqual(["moe.etp_size: world_size 4 is not divisible by ep_size × etp_size = 2 × 3 = 6"]);
    const odd = checkExpertTensorParallel({ worldSize: 4, epSize: 1, etpSize: 4, intermediate: 7 });
    expect(odd).toHaveLength(1);
    expect(odd[0]).toStartWith("moe.etp_size: the expert's intermediate size 7 is not divisible by etp_size 4");
    expect(checkExpertTensorParallel({ worldSize: 4, epSize: 2, etpSize: 0, intermediate: 6 })[0]).toStartWith("moe.etp_size: expected a positive integer");
    expect(() => expertTPRanks(0, 6, 2, 2)).toThrow("moe.etp_size: world_size 6");
    expect(() => sliceExpert(fullExpert(0, 7, 3), 7, 3, 2, 0)).toThrow("moe.etp_size");
  });
});

export type { HostExpertWeights };
