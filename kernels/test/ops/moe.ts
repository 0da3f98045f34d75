/** Conformance: top-k (ties by lower index), gatherRows / scatterAddRows with idx −1, histogram. */

import { refGatherRows, refHistogram, refScatterAddRows, refTopk } from "../reference/moe.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

/** Registers the MoE primitive tests. */
export function moeTests(t: T): void {
  t("topk descending, ties broken by lower index", async (c) => {
    const r = new Rng(1000);
    const cases: [number, number, number, boolean][] = [
      [1, 1, 1, false],
      [3, 7, 2, false],
      [5, 8, 8, false], // k = cols
      [7, 13, 3, true], // many ties (values from a small set)
      [4, 64, 8, true],
      [c.large(67, 3), 61, 2, false],
      [c.large(31, 2), c.large(257, 9), 8, true],
    ];
    for (const [rows, cols, k, ties] of cases) {
      const x = ties ? Float32Array.from({ length: rows * cols }, () => r.int(0, 4) * 0.5 - 1) : r.f32(rows * cols);
      const ref = refTopk(x, rows, cols, k);
      const values = c.output(rows * k);
      const indices = c.output(rows * k, "i32");
      c.be.topk(c.input(x), values.view, indices.view, rows, cols, k);
      c.exact(`topk indices [${rows},${cols}] k=${k}`, await indices.read(), ref.indices);
      c.exact(`topk values [${rows},${cols}] k=${k}`, await values.read(), ref.values);
      await values.checkGuards();
      await indices.checkGuards();
    }
  });

  t("gatherRows (idx −1 gives a zero row)", async (c) => {
    const r = new Rng(1010);
    for (const [rowsX, dim, n] of [[1, 1, 1], [5, 7, 11], [13, 64, 29], [c.large(97, 3), c.large(130, 2), c.large(211, 2)]] as [number, number, number][]) {
      const x = r.f32(rowsX * dim);
      const idx = Int32Array.from({ length: n }, (_, i) => (i % 5 === 3 ? -1 : r.int(0, rowsX)));
      const out = c.output(n * dim, "f32", r.f32(n * dim));
      c.be.gatherRows(c.input(x), c.ints(idx), out.view, n, dim);
      c.exact(`gatherRows rows=${rowsX} dim=${dim} n=${n}`, await out.read(), refGatherRows(x, idx, dim));
      await out.checkGuards();
    }
  });

  t("scatterAddRows with and without weights (duplicates accumulate, −1 skipped)", async (c) => {
    const r = new Rng(1020);
    for (const [rowsOut, dim, n] of [[1, 1, 1], [5, 7, 11], [13, 64, 29], [c.large(97, 3), c.large(130, 2), c.large(211, 2)]] as [number, number, number][]) {
      const x = r.f32(n * dim);
      const idx = Int32Array.from({ length: n }, (_, i) => (i % 4 === 2 ? -1 : r.int(0, rowsOut)));
      const init = r.f32(rowsOut * dim);
      for (const weighted of [false, true]) {
        const w = r.f32(n, 0, 1);
        const out = c.output(rowsOut * dim, "f32", init);
        // out is exactly rowsOut rows plus guards: the guard check catches writes past the end
        c.be.scatterAddRows(c.input(x), c.ints(idx), weighted ? c.input(w) : null, out.view, n, dim);
        const want = refScatterAddRows(x, idx, weighted ? w : null, init, dim);
        c.close(`scatterAddRows weighted=${weighted} rows=${rowsOut} dim=${dim} n=${n}`, await out.read(), want, { normwise: true, factor: 2 });
        await out.checkGuards();
      }
    }
  });

  t("histogram counts (out-of-range ignored; counts overwritten)", async (c) => {
    const r = new Rng(1030);
    for (const [n, bins] of [[1, 1], [17, 5], [64, 8], [c.large(4099, 10), 61]] as [number, number][]) {
      const idx = Int32Array.from({ length: n }, (_, i) => (i % 7 === 6 ? (i % 2 ? -1 : bins + 3) : r.int(0, bins)));
      const counts = c.output(bins, "u32", Uint32Array.from({ length: bins }, () => 99));
      c.be.histogram(c.ints(idx), counts.view, n, bins);
      c.exact(`histogram n=${n} bins=${bins}`, await counts.read(), refHistogram(idx, bins));
      await counts.checkGuards();
    }
  });
}
