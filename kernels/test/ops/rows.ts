/** Conformance: reduce, softmax (+backward), RMSNorm and LayerNorm (+backward). */

import type { ReduceOp } from "../../src/backend.ts";
import { refReduce } from "../reference/reduce.ts";
import { refLayernorm, refLayernormBackward, refRmsnorm, refRmsnormBackward, refSoftmax, refSoftmaxBackward } from "../reference/rows.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

const REDUCE: ReduceOp[] = ["sum", "mean", "max", "sumsq"];

/** Registers the row-op tests. */
export function rowTests(t: T): void {
  for (const op of REDUCE) {
    t(`reduce ${op} over the middle axis of [outer, n, inner]`, async (c) => {
      const r = new Rng(300 + REDUCE.indexOf(op));
      const shapes: [number, number, number][] = [[1, 1, 1], [3, 7, 5], [2, 61, 1], [1, 1, 13], [4, 17, 3], [1, c.large(1031), 1], [5, c.large(130), c.large(17)]];
      for (const [outer, n, inner] of shapes) {
        const x = r.f32(outer * n * inner, -3, 3);
        const { out: want, mag } = refReduce(op, x, outer, n, inner);
        const out = c.output(outer * inner);
        c.be.reduce(op, c.input(x), out.view, outer, n, inner);
        // sums of n f32 terms: error relative to Σ|terms| (mag)
        c.close(`reduce ${op} [${outer},${n},${inner}]`, await out.read(), want, { mag, factor: 4 });
        await out.checkGuards();
      }
    });
  }

  for (const log of [false, true]) {
    t(`${log ? "log-" : ""}softmax and backward (incl. large logits, max subtracted)`, async (c) => {
      const r = new Rng(log ? 401 : 400);
      const shapes: [number, number][] = [[1, 1], [3, 7], [5, 61], [2, 64], [c.large(13, 2), c.large(257, 3)]];
      for (const [rows, cols] of shapes) {
        const x = r.f32(rows * cols, -4, 4);
        if (rows > 1) for (let j = 0; j < cols; j++) x[cols + j] = x[cols + j]! * 20 + 80; // row 1 near 80: overflows exp without max subtraction
        const want = refSoftmax(x, rows, cols, log);
        const y = c.output(rows * cols);
        c.be.softmax(c.input(x), y.view, rows, cols, log);
        c.close(`softmax log=${log} [${rows},${cols}]`, await y.read(), want, { factor: 2, mag: log ? Array.from(x, (v) => Math.abs(v)) : undefined });
        await y.checkGuards();
        const dy = r.f32(rows * cols);
        const dx = c.output(rows * cols);
        c.be.softmaxBackward(c.input(want), // Float64Array: exact on f64-storage backends, rounded to f32 otherwise
           c.input(dy), dx.view, rows, cols, log);
        // gradients sum to zero over a row: entries come from cancellation → normwise bound
        c.close(`softmaxBackward log=${log} [${rows},${cols}]`, await dx.read(), refSoftmaxBackward(x, dy, rows, cols, log), { normwise: true, factor: 4 });
        await dx.checkGuards();
      }
    });
  }

  t("rmsnorm forward, backward (dw accumulates)", async (c) => {
    const r = new Rng(500);
    const eps = 1e-5;
    const shapes: [number, number][] = [[1, 1], [3, 7], [5, 61], [4, 64], [c.large(17, 2), c.large(259, 3)]];
    for (const [rows, cols] of shapes) {
      const x = r.f32(rows * cols, -2, 2);
      const w = r.f32(cols, 0.5, 1.5);
      const ref = refRmsnorm(x, w, rows, cols, eps);
      const y = c.output(rows * cols);
      const rstd = c.output(rows);
      const xv = c.input(x);
      const wv = c.input(w);
      c.be.rmsnorm(xv, wv, y.view, rstd.view, rows, cols, eps);
      c.close(`rmsnorm y [${rows},${cols}]`, await y.read(), ref.y, { factor: 2 });
      c.close(`rmsnorm rstd [${rows},${cols}]`, await rstd.read(), ref.rstd, { factor: 2 });
      await y.checkGuards();
      await rstd.checkGuards();
      const dy = r.f32(rows * cols);
      const dw0 = r.f32(cols);
      const dx = c.output(rows * cols);
      const dw = c.output(cols, "f32", dw0);
      c.be.rmsnormBackward(xv, wv, rstd.view, c.input(dy), dx.view, dw.view, rows, cols);
      const rb = refRmsnormBackward(x, w, dy, rows, cols, eps);
      c.close(`rmsnormBackward dx [${rows},${cols}]`, await dx.read(), rb.dx, { normwise: true, factor: 4 });
      c.close(`rmsnormBackward dw [${rows},${cols}]`, await dw.read(), Array.from(rb.dw, (v, j) => v + dw0[j]!), { normwise: true, factor: 4 });
      await dx.checkGuards();
      await dw.checkGuards();
    }
  });

  t("layernorm forward, backward (dw, db accumulate)", async (c) => {
    const r = new Rng(600);
    const eps = 1e-5;
    const shapes: [number, number][] = [[1, 2], [3, 7], [5, 61], [4, 64], [c.large(17, 2), c.large(259, 3)]];
    for (const [rows, cols] of shapes) {
      const x = Float32Array.from(r.f32(rows * cols, -2, 2), (v) => v + 3); // non-zero mean
      const w = r.f32(cols, 0.5, 1.5);
      const b = r.f32(cols, -0.5, 0.5);
      const ref = refLayernorm(x, w, b, rows, cols, eps);
      const y = c.output(rows * cols);
      const mean = c.output(rows);
      const rstd = c.output(rows);
      const xv = c.input(x);
      const wv = c.input(w);
      c.be.layernorm(xv, wv, c.input(b), y.view, mean.view, rstd.view, rows, cols, eps);
      // y = x̂·w + b: x̂ loses relative accuracy to the mean subtraction (|x| ≈ 3 vs std ≈ 1) → factor 8
      c.close(`layernorm y [${rows},${cols}]`, await y.read(), ref.y, { factor: 8, normwise: true });
      c.close(`layernorm mean [${rows},${cols}]`, await mean.read(), ref.mean, { factor: 2 });
      c.close(`layernorm rstd [${rows},${cols}]`, await rstd.read(), ref.rstd, { factor: 8 });
      await y.checkGuards();
      const dy = r.f32(rows * cols);
      const dw0 = r.f32(cols);
      const db0 = r.f32(cols);
      const dx = c.output(rows * cols);
      const dw = c.output(cols, "f32", dw0);
      const db = c.output(cols, "f32", db0);
      c.be.layernormBackward(xv, wv, mean.view, rstd.view, c.input(dy), dx.view, dw.view, db.view, rows, cols);
      const rb = refLayernormBackward(x, w, b, dy, rows, cols, eps);
      c.close(`layernormBackward dx [${rows},${cols}]`, await dx.read(), rb.dx, { normwise: true, factor: 8 });
      c.close(`layernormBackward dw [${rows},${cols}]`, await dw.read(), Array.from(rb.dw, (v, j) => v + dw0[j]!), { normwise: true, factor: 8 });
      c.close(`layernormBackward db [${rows},${cols}]`, await db.read(), Array.from(rb.db, (v, j) => v + db0[j]!), { normwise: true, factor: 4 });
      await dx.checkGuards();
      await dw.checkGuards();
      await db.checkGuards();
    }
  });
}
