/** Conformance: unary (+backward), affine, axpy, broadcasting binary. */

import { expect } from "../../src/runtime/bdd.ts";
import type { BinaryOp, UnaryOp } from "../../src/backend.ts";
import { refBinary, refUnary1, refUnaryDeriv1 } from "../reference/elementwise.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

const UNARY: UnaryOp[] = ["neg", "exp", "log", "sqrt", "rsqrt", "gelu_tanh", "gelu_erf", "silu", "relu", "sigmoid", "square", "abs"];
const POSITIVE: UnaryOp[] = ["log", "sqrt", "rsqrt"];
const BINARY: BinaryOp[] = ["add", "sub", "mul", "div", "max", "min"];

/** Registers the elementwise tests. */
export function elementwiseTests(t: T): void {
  for (const op of UNARY) {
    t(`unary ${op} and its backward`, async (c) => {
      const r = new Rng(100 + UNARY.indexOf(op));
      for (const n of [1, 7, 61, c.large(1031)]) {
        const x = POSITIVE.includes(op) ? r.f32(n, 0.05, 4) : r.f32(n, -4, 4);
        if (op === "relu" || op === "abs") x[0] = 0; // derivative convention at 0
        // saturating inputs: tanh/exp-based formulas must not overflow into NaN (e.g. tanh(30) via exp)
        if (!POSITIVE.includes(op)) [-30, 30, -12, 12].forEach((v, i) => i + 1 < n && (x[i + 1] = v));
        const dy = r.f32(n, -1, 1);
        const y = c.output(n);
        c.be.unary(op, c.input(x), y.view, n);
        // transcendental ops: one f32 rounding of the result plus the kernel's own function error
        c.close(`unary ${op} n=${n}`, await y.read(), Array.from(x, (v) => refUnary1(op, v)));
        await y.checkGuards();
        const dx = c.output(n);
        c.be.unaryBackward(op, c.input(x), c.input(dy), dx.view, n);
        c.close(`unaryBackward ${op} n=${n}`, await dx.read(), Array.from(x, (v, i) => dy[i]! * refUnaryDeriv1(op, v)), { factor: 2 });
        await dx.checkGuards();
      }
    });
  }

  t("affine y = αx + β (and in place) and axpy y += αx", async (c) => {
    const r = new Rng(7);
    for (const n of [1, 17, c.large(1000)]) {
      const x = r.f32(n, -3, 3);
      const y = c.output(n);
      c.be.affine(c.input(x), y.view, n, 0.37, -1.25);
      // mag: |αx| + |β| (the sum's terms)
      c.close("affine", await y.read(), Array.from(x, (v) => 0.37 * v - 1.25), { mag: Array.from(x, (v) => Math.abs(0.37 * v) + 1.25) });
      await y.checkGuards();
      const inPlace = c.input(x);
      c.be.affine(inPlace, inPlace, n, -2, 0);
      c.close("affine in place", await c.read(inPlace, n), Array.from(x, (v) => -2 * v));
      const y0 = r.f32(n);
      const acc = c.output(n, "f32", y0);
      c.be.axpy(-0.75, c.input(x), acc.view, n);
      c.close("axpy", await acc.read(), Array.from(x, (v, i) => y0[i]! - 0.75 * v), { mag: Array.from(x, (v, i) => Math.abs(y0[i]!) + Math.abs(0.75 * v)) });
      await acc.checkGuards();
    }
  });

  const L = (c: { large(n: number, min?: number): number }) => c.large(67, 5);
  const SHAPES: ((c: { large(n: number, min?: number): number }) => [number[], number[]])[] = [
    () => [[7, 13], [7, 13]],
    () => [[], [5, 3]],
    () => [[5, 3], []],
    () => [[3, 1, 5], [4, 5]],
    () => [[1], [17]],
    () => [[2, 1, 3], [1, 4, 1]],
    () => [[6, 1], [1, 11]],
    () => [[2, 3, 1, 2], [3, 5, 1]],
    (c) => [[L(c), 1], [1, 63]],
    (c) => [[9, L(c)], [L(c)]],
  ];
  for (const op of BINARY) {
    t(`binary ${op} with broadcasting`, async (c) => {
      const r = new Rng(200 + BINARY.indexOf(op));
      for (const sh of SHAPES) {
        const [as, bs] = sh(c);
        const na = as.reduce((a, b) => a * b, 1);
        const nb = bs.reduce((a, b) => a * b, 1);
        const a = r.f32(na, -2, 2);
        const b = op === "div" ? Float32Array.from(r.f32(nb, 0.5, 2), (v, i) => (i % 2 ? -v : v)) : r.f32(nb, -2, 2);
        const [want, os] = refBinary(op, a, as, b, bs);
        const out = c.output(want.length);
        c.be.binary(op, c.input(a), as, c.input(b), bs, out.view);
        const mag = op === "add" || op === "sub" ? refBinary("add", a.map(Math.abs), as, b.map(Math.abs), bs)[0] : undefined;
        c.close(`binary ${op} [${as}]·[${bs}] → [${os}]`, await out.read(), want, { mag });
        await out.checkGuards();
      }
      expect(() => c.be.binary(op, c.input(r.f32(6)), [2, 3], c.input(r.f32(8)), [2, 4], c.output(12).view)).toThrow();
    });
  }
}
