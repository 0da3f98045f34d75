/**
 * Per-rank model-state memory equals the ZeRO paper's formulas (Rajbhandari et al., SC'20, §5;
 * docs/domain.md §1), read from the backend's memory accounting (bytes per tag, current after the
 * optimizer step), exactly up to the padding the engine reports.
 *
 * Per rank, with Ψ parameters and N ranks (b = bytes of a 16-bit or fp32 element):
 *
 * | stage | param (16-bit / fp32) | grad       | optim (fp32 master+m+v / m+v) |
 * | ----- | --------------------- | ---------- | ----------------------------- |
 * | 0     | 2Ψ / 4Ψ               | 2Ψ / 4Ψ    | 12Ψ / 8Ψ                      |
 * | 1     | 2Ψ / 4Ψ               | 2Ψ / 4Ψ    | 12Ψ/N / 8Ψ/N                  |
 * | 2     | 2Ψ / 4Ψ               | 2Ψ/N / 4Ψ/N| 12Ψ/N / 8Ψ/N                  |
 * | 3     | 2Ψ/N / 4Ψ/N           | 2Ψ/N / 4Ψ/N| 12Ψ/N / 8Ψ/N                  |
 *
 * so the totals are 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N (mixed) and 16Ψ, 8Ψ + 8Ψ/N, 4Ψ + 12Ψ/N,
 * 16Ψ/N (fp32). Ψ/N is not whole: every rank holds a shard of ceil(numel/N) elements per unit; the
 * real elements of the shards sum to Ψ over the ranks and the rest is padding (reported by
 * `engine.paddingBytes()`, per tag recomputed by the fixture). The exact statement tested is: for
 * every tag, Σ over ranks of (bytes − padding bytes) = N · formula, every rank holds the same bytes,
 * and replicated states hold exactly their formula on every rank.
 *
 * Persistent units under ZeRO-3 (`stage3_param_persistence_threshold` above a unit's size) keep
 * whole parameters on every rank; their gradients and optimizer states are still sharded. With
 * Ψ = Ψ_p (persistent) + Ψ_s (sharded) the param term becomes b·(Ψ_p + Ψ_s/N): the table's 16Ψ/N
 * grows by b·Ψ_p·(N−1)/N.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { launch } from "../../src/launch/index.ts";
import { AWKWARD_NUMEL, awkwardModel, FIXTURE_ENTRY, tinyJob, type TrainArgs, type TrainOut } from "./fixtures.ts";

const WORLDS = [2, 3, 4] as const;
const PSI = AWKWARD_NUMEL;
/** Threshold above layer (1325) and expert (525) units, below embed (6425) and head (6450). */
const PERSIST = 1400;
const PERSISTENT_NUMEL = 2 * (1325 + 3 * 525);

function job(stage: number, bf16: boolean, persistence = 0): Record<string, unknown> {
  return tinyJob({
    model: awkwardModel(),
    bf16: { enabled: bf16 },
    zero_optimization: { stage, stage3_param_persistence_threshold: persistence },
  });
}

/** N · (bytes per rank) of each tag by docs/domain.md §1, for Ψ_p persistent elements (ZeRO-3 only). */
function formulaTimesN(stage: number, bf16: boolean, n: number, psiP = 0): { param: number; grad: number; optim: number } {
  const b = bf16 ? 2 : 4;
  const o = bf16 ? 12 : 8;
  const psiS = PSI - psiP;
  return {
    param: stage === 3 ? b * (n * psiP + psiS) : n * b * PSI,
    grad: stage >= 2 ? b * PSI : n * b * PSI,
    optim: stage >= 1 ? o * PSI : n * o * PSI,
  };
}

const results: Record<number, Record<string, TrainOut[]>> = {};

beforeAll(async () => {
  for (const n of WORLDS) {
    const runs: TrainArgs[] = [];
    for (const bf16 of [false, true]) {
      for (const s of [0, 1, 2, 3]) runs.push({ job: job(s, bf16), steps: 1, label: `${s}/${bf16}/0` });
      runs.push({ job: job(3, bf16, PERSIST), steps: 1, label: `3/${bf16}/${PERSIST}` });
    }
    const res = await launch<TrainOut[]>({ worldSize: n, entry: FIXTURE_ENTRY, args: { runs } });
    results[n] = {};
    runs.forEach((r, i) => (results[n]![r.label!] = res.map((rank) => rank[i]!)));
  }
}, 300_000);

describe("per-rank memory equals docs/domain.md §1 up to reported padding", () => {
  for (const n of WORLDS) {
    for (const bf16 of [false, true]) {
      for (const [stage, persist] of [[0, 0], [1, 0], [2, 0], [3, 0], [3, PERSIST]] as const) {
        test(`world ${n}, stage ${stage}, ${bf16 ? "bf16" : "fp32"}${persist ? `, persistence threshold ${persist}` : ""}`, () => {
          const ranks = results[n]![`${stage}/${bf16}/${persist}`]!;
          expect(ranks.length).toBe(n);
          const psiP = persist ? PERSISTENT_NUMEL : 0;
          const want = formulaTimesN(stage, bf16, n, psiP);
          for (const r of ranks) {
            expect(r.numel).toBe(PSI);
            expect(r.replicatedNumel).toBe(stage === 3 ? psiP : PSI);
            expect(r.padByTag.param + r.padByTag.grad + r.padByTag.optim).toBe(r.padding);
            // nothing else is left resident after the step
            for (const tag of ["gathered", "activation", "comm", "other"]) expect(r.memory.current[tag]).toBe(0);
            // every rank holds the same bytes (equal padded shards)
            for (const tag of ["param", "grad", "optim"]) expect(r.memory.current[tag]).toBe(ranks[0]!.memory.current[tag]);
          }
          for (const tag of ["param", "grad", "optim"] as const) {
            const realBytes = ranks.reduce((s, r) => s + r.memory.current[tag]! - r.padByTag[tag], 0);
            expect(realBytes).toBe(want[tag]);
          }
          // totals against the paper's table (per rank, padding spread evenly)
          const total = ranks.reduce((s, r) => s + r.memory.current.param! + r.memory.current.grad! + r.memory.current.optim! - r.padding, 0) / n;
          const k = bf16 ? { 0: 16 * PSI, 1: 4 * PSI + (12 * PSI) / n, 2: 2 * PSI + (14 * PSI) / n, 3: (16 * PSI) / n } : { 0: 16 * PSI, 1: 8 * PSI + (8 * PSI) / n, 2: 4 * PSI + (12 * PSI) / n, 3: (16 * PSI) / n };
          const extra = stage === 3 ? ((bf16 ? 2 : 4) * psiP * (n - 1)) / n : 0;
          expect(total).toBeCloseTo(k[stage] + extra, 6);
          // padding is really there at these awkward sizes (except where nothing is sharded)
          if (stage > 0) expect(ranks.some((r) => r.padding > 0)).toBe(true);
          else expect(ranks.every((r) => r.padding === 0)).toBe(true);
        });
      }
    }
  }
});
