/**
 * Balanced partitioner (partition.ts) against independent references: brute force over every
 * balanced partition of small random graphs, and planted cliques whose optimum (cut 0 or the
 * planted noise) is known.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { cutWeight, partitionBalanced } from "../src/partition.ts";
import { prng as rng } from "../bench/_pair-router.ts";



function randomGraph(n: number, seed: number, density = 0.6): Float64Array {
  const r = rng(seed);
  const w = new Float64Array(n * n);
  for (let u = 0; u < n; u++)
    for (let v = u + 1; v < n; v++) {
      const x = r() < density ? Math.floor(r() * 20) : 0;
      w[u * n + v] = w[v * n + u] = x;
    }
  return w;
}

/** Smallest cut over every assignment with exactly n/P nodes per part (independent enumeration). */
function bruteForce(w: Float64Array, n: number, P: number): number {
  const per = n / P;
  const part = new Int32Array(n);
  const used = new Int32Array(P);
  let best = Infinity;
  const rec = (u: number, maxUsed: number): void => {
    if (u === n) {
      best = Math.min(best, cutWeight(w, part));
      return;
    }
    for (let p = 0; p <= Math.min(maxUsed + 1, P - 1); p++) {
      if (used[p]! >= per) continue;
      part[u] = p;
      used[p]!++;
      rec(u + 1, Math.max(maxUsed, p));
      used[p]!--;
    }
  };
  rec(0, -1);
  return best;
}

function sizes(part: Int32Array, P: number): number[] {
  const c = new Array<number>(P).fill(0);
  for (const p of part) c[p]!++;
  return c;
}

describe("partitionBalanced", () => {
  test("equals the brute-force optimum on small random graphs (n 6..12, P 2..4)", () => {
    let exact = 0;
    let cases = 0;
    for (const [n, P] of [[6, 2], [6, 3], [8, 2], [8, 4], [9, 3], [10, 2], [12, 3], [12, 4]] as const) {
      for (let s = 0; s < 6; s++) {
        const w = randomGraph(n, 1000 * n + 10 * P + s);
        const part = partitionBalanced(w, n, P);
        expect(sizes(part, P)).toEqual(new Array(P).fill(n / P));
        const opt = bruteForce(w, n, P);
        const got = cutWeight(w, part);
        expect(got).toBeGreaterThanOrEqual(opt);
        cases++;
        if (got === opt) exact++;
      }
    }
    // deterministic heuristic: on these 48 graphs it finds the optimum every time
    expect(exact).toBe(cases);
  });

  test("recovers planted cliques exactly (cut = planted noise only) for scrambled node order", () => {
    for (const [n, P] of [[16, 4], [32, 4], [24, 3], [64, 8]] as const) {
      const r = rng(n * P);
      const perm = Array.from({ length: n }, (_, i) => i).sort(() => r() - 0.5);
      const group = new Int32Array(n);
      perm.forEach((node, i) => (group[node] = Math.floor(i / (n / P))));
      const w = new Float64Array(n * n);
      for (let u = 0; u < n; u++)
        for (let v = u + 1; v < n; v++) {
          const x = group[u] === group[v] ? 50 + Math.floor(r() * 10) : r() < 0.2 ? 1 : 0;
          w[u * n + v] = w[v * n + u] = x;
        }
      const part = partitionBalanced(w, n, P);
      const planted = cutWeight(w, group);
      expect(cutWeight(w, part)).toBe(planted);
      // every planted group lands in one part
      for (let g = 0; g < P; g++) expect(new Set(Array.from(part).filter((_, u) => group[u] === g)).size).toBe(1);
    }
  });

  test("never worse than the contiguous split; respects the load cap when a start does", () => {
    const n = 16;
    const P = 4;
    for (let s = 0; s < 5; s++) {
      const w = randomGraph(n, 77 + s, 0.4);
      const r = rng(s);
      const load = Array.from({ length: n }, () => 10 + Math.floor(r() * 10));
      const part = partitionBalanced(w, n, P, { load, loadTolerance: 0.1 });
      const contig = Int32Array.from({ length: n }, (_, e) => Math.floor(e / (n / P)));
      const pl = new Array<number>(P).fill(0);
      part.forEach((p, u) => (pl[p]! += load[u]!));
      const mean = load.reduce((a, b) => a + b, 0) / P;
      expect(Math.max(...pl)).toBeLessThanOrEqual(mean * 1.1 + 1e-9);
      const cpl = new Array<number>(P).fill(0);
      contig.forEach((p, u) => (cpl[p]! += load[u]!));
      if (Math.max(...cpl) <= mean * 1.1) expect(cutWeight(w, part)).toBeLessThanOrEqual(cutWeight(w, contig));
      expect(sizes(part, P)).toEqual([4, 4, 4, 4]);
    }
  });

  test("bad input names what is wrong", () => {
    expect(() => partitionBalanced(new Float64Array(9), 3, 2)).toThrow(/cannot be split into 2 equal parts/);
    expect(() => partitionBalanced(new Float64Array(8), 4, 2)).toThrow(/expected 4×4/);
    const w = new Float64Array(16);
    w[1] = 1;
    expect(() => partitionBalanced(w, 4, 2)).toThrow(/not symmetric at \[0\]\[1\]/);
    expect(() => partitionBalanced(new Float64Array(16), 4, 2, { load: [1, 2, 3] })).toThrow(/load has 3 entries/);
  });
});
