/**
 * Placement benchmark (`bun run bench placement`, from the repository root): on a router skewed to fixed expert
 * teams (_pair-router.ts; world 4 = ep 4, E = 16), a warm-up measures the co-occurrence counts and
 * loads (co-occurrence.ts), the placements are computed from them, and fresh routing (another seed)
 * is dispatched through each placement. Printed per placement and top-k: all_to_all traffic per
 * step as (token, slot) rows (what the dispatcher sends) and as distinct (token, destination)
 * copies (a dispatcher that sends a token once per rank), each crossing ranks, and crossing the
 * groups of a 2 × 2 topology ({"groups": [[0,1],[2,3]]}); bytes = copies × hidden × 4 (f32,
 * hidden 4096); the max per-rank token load over the mean. Counts only: no timing.
 * `--summary FILE` (a `--summary` of a trained sparse model, top-2) prints the same comparison from
 * the run's co-occurrence counts per layer (in-sample).
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

/**
 * Top-2 traffic of a placement from a layer's co-occurrence counts alone (a trained model's
 * `--summary`): a top-2 token goes to |D| = 2 − [both experts on one rank] ranks, and from a source
 * rank drawn uniformly each copy crosses ranks with probability (P−1)/P and groups with (G−1)/G,
 * so Σ|D| = T + cut(owner) fixes both. Returns Σ|D| and the max rank load over the mean.
 */
export function pairTraffic(pairs: Float64Array, load: ArrayLike<number>, owner: ArrayLike<number>, E: number, P: number): { copies: number; loadMaxOverMean: number } {
  let T = 0;
  let cut = 0;
  for (let a = 0; a < E; a++) for (let b = a + 1; b < E; b++) {
    T += pairs[a * E + b]!;
    if (owner[a] !== owner[b]) cut += pairs[a * E + b]!;
  }
  const per = new Float64Array(P);
  let tot = 0;
  for (let e = 0; e < E; e++) {
    per[owner[e]!]! += load[e]!;
    tot += load[e]!;
  }
  return { copies: T + cut, loadMaxOverMean: tot > 0 ? Math.max(...per) / (tot / P) : 1 };
}

/** `--summary FILE`: the placements of a trained model's routing (its `moe.expert_pairs` and
 * `moe.expert_counts`, top-2), ep 4, topology 2 × 2, measured in-sample. */
async function fromSummary(file: string): Promise<void> {
  const { readFileSync } = await import("node:fs");
  const { pairsFromNested } = await import("../src/pair-stats.ts");
  const m = JSON.parse(readFileSync(file, "utf8")).moe as { expert_pairs?: number[][][]; expert_counts: number[][] };
  if (!m?.expert_pairs) throw new Error(`${file}: no moe.expert_pairs (a --summary written by this version, of a sparse model)`);
  const n = m.expert_counts.find((r) => r.length > 0)!.length;
  const pairs = pairsFromNested(m.expert_pairs, m.expert_counts.length, n, `${file} moe.expert_pairs`);
  console.log(`routing log ${file}: ${n} experts, ep 4, topology {"groups": [[0,1],[2,3]]}; copies = tokens × distinct destination ranks (top-2)`);
  console.log(`layer  placement       distinct ranks per token   vs contiguous   max load / mean`);
  pairs.forEach((p, l) => {
    if (!p) return;
    const load = m.expert_counts[l]!;
    let T = 0;
    for (let a = 0; a < n; a++) for (let b = a + 1; b < n; b++) T += p[a * n + b]!;
    const sum = load.reduce((x, y) => x + y, 0);
    if (sum !== 2 * T) throw new Error(`${file} layer ${l}: expert counts sum to ${sum}, not 2 × the ${T} pairs — the figures here hold for top-2 only`);
    let base = 0;
    for (const s of ["contiguous", "round_robin", "balanced", "co_occurrence", "topology"] as const) {
      const [pl] = placeExperts(s, 1, n, P, [load], { pairs: [p], groups });
      const r = pairTraffic(p, load, pl!.owner, n, P);
      if (s === "contiguous") base = r.copies;
      console.log(`L${l}`.padEnd(7) + s.padEnd(16) + (r.copies / T).toFixed(3).padStart(24) + `${(100 * (r.copies / base - 1)).toFixed(1)} %`.padStart(16) + r.loadMaxOverMean.toFixed(3).padStart(18));
    }
  });
}

/** Prints the table (see the module comment); `--summary FILE` instead reads a trained model's
 * routing statistics ({@link fromSummary}). */
export async function main(args: string[] = []): Promise<void> {
  const i = args.indexOf("--summary");
  if (i >= 0) {
    if (!args[i + 1]) throw new Error("bench placement: --summary needs a file");
    return fromSummary(args[i + 1]!);
  }
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
