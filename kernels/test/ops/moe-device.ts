/**
 * Conformance: the MoE path's device ops — groupedMatmulDev and groupedWeightGrad (row offsets in a
 * device buffer), moePermute (stable counting sort by expert) and moeCombine (per-token sum in
 * expert order) — against float64 / host references and, on the cpu backend, bit for bit against
 * the per-expert ops they replace (matmul per group, scatterAddRows). Awkward sizes: one row, one
 * token, empty groups first/middle/last, every row in one group, primes, groups longer than a
 * 128-row tile, rows past offsets[G] that must stay untouched, dropped pairs, experts with no pairs.
 */

import { checkGroupedRows, checkGroupedWGrad } from "./grouped-awkward.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

/** Host reference of moePermute (stable counting sort; expert −1 = dropped). */
function refPermute(idx: Int32Array, topK: number, bins: number): { counts: Int32Array; offsets: Int32Array; rowOfPair: Int32Array; tokenOfRow: Int32Array; pairOfRow: Int32Array } {
  const n = idx.length;
  const counts = new Int32Array(bins);
  for (const e of idx) if (e >= 0 && e < bins) counts[e]!++;
  const offsets = new Int32Array(bins + 1);
  for (let e = 0; e < bins; e++) offsets[e + 1] = offsets[e]! + counts[e]!;
  const rowOfPair = new Int32Array(n).fill(-1);
  const tokenOfRow = new Int32Array(n).fill(-1);
  const pairOfRow = new Int32Array(n).fill(-1);
  let r = 0;
  for (let e = 0; e < bins; e++) {
    for (let p = 0; p < n; p++) {
      if (idx[p] !== e) continue;
      rowOfPair[p] = r;
      tokenOfRow[r] = Math.floor(p / topK);
      pairOfRow[r] = p;
      r++;
    }
  }
  return { counts, offsets, rowOfPair, tokenOfRow, pairOfRow };
}

/** Expert choices of T tokens × k distinct experts (some pairs dropped when `drop`). */
function choices(r: Rng, T: number, k: number, E: number, mode: "random" | "one" | "skewed", drop: boolean): Int32Array {
  const idx = new Int32Array(T * k);
  for (let t = 0; t < T; t++) {
    const taken = new Set<number>();
    for (let s = 0; s < k; s++) {
      let e: number;
      if (mode === "one") e = s; // every token's first slot to expert 0, second to 1, …
      else if (mode === "skewed") e = (s + (r.int(0, 4) === 0 ? r.int(0, E) : 0)) % E;
      else e = r.int(0, E);
      while (taken.has(e)) e = (e + 1) % E;
      taken.add(e);
      idx[t * k + s] = drop && r.int(0, 5) === 0 ? -1 : e;
    }
  }
  return idx;
}

/** Registers the device MoE op tests. */
export function moeDeviceTests(t: T): void {
  const gcases = (large: (n: number, min?: number) => number): { name: string; offsets: number[]; R: number; N: number; K: number; transB: boolean; acc: boolean }[] => [
    { name: "one group of one row", offsets: [0, 1], R: 1, N: 1, K: 1, transB: true, acc: false },
    { name: "empty first/middle/last, rows past the end", offsets: [0, 0, 3, 3, 70, 70], R: 75, N: 7, K: 13, transB: true, acc: false },
    { name: "every row in one of 4 groups, K×N weights", offsets: [0, 0, 0, 137, 137], R: 137, N: 17, K: 5, transB: false, acc: false },
    { name: "primes, accumulate", offsets: [0, 2, 7, 18, 83], R: 89, N: 67, K: 23, transB: true, acc: true },
    { name: "8 experts, larger", offsets: [0, 5, 5, 40, 41, 77, 77, 90, large(260, 100)], R: large(260, 100), N: large(130, 17), K: large(96, 16), transB: true, acc: false },
    { name: "all groups empty", offsets: [0, 0, 0], R: 3, N: 3, K: 4, transB: false, acc: false },
  ];

  t("groupedMatmulDev = per-group matmul; rows outside the groups untouched", async (c) => {
    const r = new Rng(4100);
    for (const { name, offsets, R, N, K, transB, acc } of gcases((n, m) => c.large(n, m))) await checkGroupedRows(c, r, { name, offsets, R, N, K }, transB, acc, true);
  });

  t("groupedWeightGrad = per-group dyᵀ·x (empty groups: zeros, or unchanged when accumulating)", async (c) => {
    const r = new Rng(4200);
    // dw_g is [M, N] with M = the case's K: dy [R, M], x [R, N]; a gap of 3 between groups
    for (const { name, offsets, R, N, K, acc } of gcases((n, m) => c.large(n, m))) await checkGroupedWGrad(c, r, { name, offsets, R, M: K, N, gap: 3 }, acc, true);
  });

  t("moePermute: stable counting sort by expert (drops, one expert, empty experts)", async (c) => {
    const r = new Rng(4300);
    const cases: [string, number, number, number, "random" | "one" | "skewed", boolean][] = [
      ["one token, k 1", 1, 1, 1, "random", false],
      ["one token, k 2 of 5", 1, 2, 5, "random", false],
      ["every token to experts 0/1 of 7", 37, 2, 7, "one", false],
      ["skewed, drops", 61, 2, 8, "skewed", true],
      ["primes, k 3, drops", c.large(211, 13), 3, 13, "random", true],
      ["larger, k 8 of 64", c.large(300, 20), 8, 64, "random", false],
      ["300 experts (> one workgroup)", 97, 2, 300, "random", true],
    ];
    for (const [name, T, k, E, mode, drop] of cases) {
      const idx = choices(r, T, k, E, mode, drop);
      const n = T * k;
      const want = refPermute(idx, k, E);
      const counts = c.output(E, "i32");
      const offsets = c.output(E + 1, "i32");
      const rowOfPair = c.output(n, "i32");
      const tokenOfRow = c.output(n, "i32");
      const pairOfRow = c.output(n, "i32");
      c.be.moePermute(c.ints(idx), n, k, E, counts.view, offsets.view, rowOfPair.view, tokenOfRow.view, pairOfRow.view);
      c.exact(`moePermute ${name} counts`, await counts.read(), want.counts);
      c.exact(`moePermute ${name} offsets`, await offsets.read(), want.offsets);
      c.exact(`moePermute ${name} rowOfPair`, await rowOfPair.read(), want.rowOfPair);
      c.exact(`moePermute ${name} tokenOfRow`, await tokenOfRow.read(), want.tokenOfRow);
      c.exact(`moePermute ${name} pairOfRow`, await pairOfRow.read(), want.pairOfRow);
      for (const o of [counts, offsets, rowOfPair, tokenOfRow, pairOfRow]) await o.checkGuards();
    }
  });

  t("moeCombine: per-token sum in expert order (= scatterAddRows in row order)", async (c) => {
    const r = new Rng(4400);
    const cases: [number, number, number, number, boolean][] = [
      [1, 1, 1, 1, false],
      [1, 2, 3, 5, true],
      [37, 2, 7, 13, false],
      [61, 2, 8, 67, true],
      [c.large(131, 9), 3, 11, c.large(130, 7), true],
      [29, 8, 16, 5, false],
    ];
    for (const [T, k, E, dim, drop] of cases) {
      const idx = choices(r, T, k, E, "random", drop);
      const n = T * k;
      const p = refPermute(idx, k, E);
      const kept = p.offsets[E]!;
      const x = r.f32(n * dim);
      const w = r.f32(n, 0, 1);
      const init = r.f32(T * dim);
      for (const [weighted, acc] of [[true, false], [false, true], [true, true]] as [boolean, boolean][]) {
        const out = c.output(T * dim, "f32", init);
        c.be.moeCombine(c.input(x), n, c.ints(p.rowOfPair), weighted ? c.input(w) : null, out.view, T, k, dim, acc);
        const got = await out.read();
        await out.checkGuards();
        // float64 reference: rows of each token ascending
        const want = new Float64Array(T * dim);
        for (let t = 0; t < T; t++) {
          const rows: [number, number][] = [];
          for (let s = 0; s < k; s++) if (p.rowOfPair[t * k + s]! >= 0) rows.push([p.rowOfPair[t * k + s]!, t * k + s]);
          rows.sort((a, b) => a[0] - b[0]);
          for (let j = 0; j < dim; j++) {
            let a = acc ? init[t * dim + j]! : 0;
            for (const [row, pair] of rows) a += (weighted ? w[pair]! : 1) * x[row * dim + j]!;
            want[t * dim + j] = a;
          }
        }
        c.close(`moeCombine T=${T} k=${k} dim=${dim} weighted=${weighted} acc=${acc}`, got, want, { normwise: true, factor: 2 });
        if (c.be.info.name === "cpu") {
          // the op it replaces: scatterAddRows of the kept rows by token, weights by pair
          const ref = c.output(T * dim, "f32", acc ? init : new Float32Array(T * dim));
          const wRows = Float32Array.from({ length: kept }, (_, i) => w[p.pairOfRow[i]!]!);
          c.be.scatterAddRows(c.input(x.subarray(0, kept * dim)), c.ints(p.tokenOfRow.subarray(0, kept)), weighted ? c.input(wRows) : null, ref.view, kept, dim);
          c.exact(`moeCombine T=${T} k=${k} weighted=${weighted} acc=${acc} vs scatterAddRows`, got, await ref.read());
        }
      }
    }
  });

  t("gatherAlongRows / scatterAddAlongRows (the router's chosen probabilities and their gradient)", async (c) => {
    const r = new Rng(4500);
    for (const [rows, cols, k] of [[1, 1, 1], [7, 5, 2], [c.large(131, 9), 8, 2], [29, 64, 8], [13, 300, 3]] as [number, number, number][]) {
      const x = r.f32(rows * cols);
      const idx = Int32Array.from({ length: rows * k }, (_, i) => (i % 7 === 5 ? -1 : r.int(0, cols)));
      const out = c.output(rows * k, "f32", r.f32(rows * k));
      c.be.gatherAlongRows(c.input(x), c.ints(idx), out.view, rows, cols, k);
      const want = Float32Array.from(idx, (col, i) => (col >= 0 ? x[Math.floor(i / k) * cols + col]! : 0));
      c.exact(`gatherAlongRows [${rows},${cols}] k=${k}`, await out.read(), want);
      await out.checkGuards();
      const g = r.f32(rows * k);
      const init = r.f32(rows * cols);
      const dx = c.output(rows * cols, "f32", init);
      c.be.scatterAddAlongRows(c.input(g), c.ints(idx), dx.view, rows, cols, k);
      const wantDx = Float64Array.from(init);
      for (let i = 0; i < rows * k; i++) if (idx[i]! >= 0) wantDx[Math.floor(i / k) * cols + idx[i]!]! += g[i]!;
      c.close(`scatterAddAlongRows [${rows},${cols}] k=${k}`, await dx.read(), wantDx, { normwise: true });
      await dx.checkGuards();
    }
  });
}
