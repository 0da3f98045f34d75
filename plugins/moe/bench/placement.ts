/**
 * Placement benchmark (`bun run bench placement`, from the repository root): on a router skewed to fixed expert
 * teams (_pair-router.ts; world 4 = ep 4, E = 16), a warm-up measures the co-occurrence counts and
 * loads (co-occurrence.ts), the placements are computed from them, and fresh routing (another seed)
 * is dispatched through each placement. Printed per placement and top-k: all_to_all traffic per
 * step as (token, slot) rows (what the dispatcher sends) and as distinct (token, destination)
 * copies (a dispatcher that sends a token once per rank), each crossing ranks, and crossing the
 * groups of a 2 × 2 topology ({"groups": [[0,1],[2,3]]}); bytes = copies × hidden × 4 (f32,
 * hidden 4096); the max per-rank token load over the mean. Counts only: no timing.
 */
import { addPairCounts, addTraffic, crossGroup, crossRank } from "../src/co-occurrence.ts";
import { placeExperts, type PlacementStrategy } from "../src/placement.ts";
import { pairRouterIndices } from "./_pair-router.ts";

const E = 16;
const P = 4;
const T = 4096; // tokens per step over the EP group
const HIDDEN = 4096;
const groups = [[0, 1], [2, 3]];
const groupOf = [0, 0, 1, 1];

/** Traffic figures of one placement on one step's routing. */
export function measure(strategy: PlacementStrategy, k: number, warm: Int32Array, step: Int32Array) {
  const pairs = new Float64Array(E * E);
  addPairCounts(warm, warm.length / k, k, E, pairs);
  const load = new Float64Array(E);
  for (const e of warm) if (e >= 0) load[e]! += 1;
  const [pl] = placeExperts(strategy, 1, E, P, [load], { pairs: [pairs], groups });
  const rows = new Float64Array(P * P);
  const copies = new Float64Array(P * P);
  const n = step.length / k;
  // token t comes from EP rank t mod P
  for (let s = 0; s < P; s++) {
    const mine: number[] = [];
    for (let t = s; t < n; t += P) for (let j = 0; j < k; j++) mine.push(step[t * k + j]!);
    addTraffic(mine, mine.length / k, k, pl!.owner, s, P, rows, copies);
  }
  const rankLoad = new Float64Array(P);
  for (const e of step) rankLoad[pl!.owner[e]!]! += 1;
  const mean = rankLoad.reduce((a, b) => a + b, 0) / P;
  return { owner: Array.from(pl!.owner), rowsCross: crossRank(rows, P), copiesCross: crossRank(copies, P), copiesCrossGroup: crossGroup(copies, groupOf), rowsCrossGroup: crossGroup(rows, groupOf), loadMaxOverMean: Math.max(...rankLoad) / mean };
}

/** Prints the table (see the module comment); no arguments. */
export function main(): void {
  const mib = (x: number) => ((x * HIDDEN * 4) / 2 ** 20).toFixed(1);
  const pct = (a: number, b: number) => `${(100 * (a / b - 1)).toFixed(1)} %`;
  for (const k of [2, 4]) {
    const warm = pairRouterIndices({ E, k, tokens: T * 4, seed: 1 });
    const step = pairRouterIndices({ E, k, tokens: T, seed: 2 });
    console.log(`\nrouter skewed to fixed teams of ${k} experts, E ${E}, ep 4, ${T} tokens/step, hidden ${HIDDEN} f32; warm-up ${T * 4} tokens`);
    console.log(`placement       cross-rank copies (MiB)   cross-group copies (MiB)   cross-rank rows (MiB)   max load / mean   owner`);
    const base = measure("contiguous", k, warm, step);
    for (const s of ["contiguous", "round_robin", "balanced", "co_occurrence", "topology"] as const) {
      const m = measure(s, k, warm, step);
      console.log(`${s.padEnd(15)} ${String(m.copiesCross).padStart(6)} (${mib(m.copiesCross)})`.padEnd(42) + `${String(m.copiesCrossGroup).padStart(6)} (${mib(m.copiesCrossGroup)})`.padEnd(27) + `${String(m.rowsCross).padStart(6)} (${mib(m.rowsCross)})`.padEnd(24) + `${m.loadMaxOverMean.toFixed(3)}`.padEnd(18) + m.owner.join(""));
    }
    const co = measure("co_occurrence", k, warm, step);
    const tp = measure("topology", k, warm, step);
    console.log(`co_occurrence vs contiguous: cross-rank copies ${pct(co.copiesCross, base.copiesCross)}; topology vs contiguous: cross-group copies ${pct(tp.copiesCrossGroup, base.copiesCrossGroup)}, cross-rank copies ${pct(tp.copiesCross, base.copiesCross)}; rows (one per (token, slot), today's dispatcher) cross-rank ${pct(co.rowsCross, base.rowsCross)}`);
  }
}
