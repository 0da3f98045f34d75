/**
 * Float64 reference for elementwise ops, written from the textbook formulas (independent of
 * kernels/src/cpu). erf is computed by composite Simpson integration of 2/√π·e^(−t²).
 */

import type { BinaryOp, UnaryOp } from "../../src/backend.ts";

/** erf(x) = 2/√π ∫₀ˣ e^(−t²) dt by composite Simpson with 4000 intervals (error < 1e-13 for |x| ≤ 6). */
export function refErf(x: number): number {
  if (x > 6) return 1;
  if (x < -6) return -1;
  const n = 4000;
  const h = x / n;
  let s = 1 + Math.exp(-x * x);
  for (let i = 1; i < n; i++) {
    const t = i * h;
    s += (i % 2 === 1 ? 4 : 2) * Math.exp(-t * t);
  }
  return ((s * h) / 3) * (2 / Math.sqrt(Math.PI));
}

/** Standard normal CDF Φ(x) = (1 + erf(x/√2))/2. */
function Phi(x: number): number {
  return 0.5 * (1 + refErf(x / Math.SQRT2));
}

function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/** op(x) for one value. */
export function refUnary1(op: UnaryOp, x: number): number {
  switch (op) {
    case "neg": return -x;
    case "exp": return Math.exp(x);
    case "log": return Math.log(x);
    case "sqrt": return Math.sqrt(x);
    case "rsqrt": return Math.pow(x, -0.5);
    case "gelu_tanh": {
      const inner = Math.sqrt(2 / Math.PI) * (x + 0.044715 * Math.pow(x, 3));
      return 0.5 * x * (1 + Math.tanh(inner));
    }
    case "gelu_erf": return x * Phi(x);
    case "silu": return x * sigmoid(x);
    case "relu": return Math.max(0, x);
    case "sigmoid": return sigmoid(x);
    case "square": return x * x;
    case "abs": return Math.abs(x);
  }
}

/** op'(x) for one value (relu'(0) = abs'(0) = 0). */
export function refUnaryDeriv1(op: UnaryOp, x: number): number {
  switch (op) {
    case "neg": return -1;
    case "exp": return Math.exp(x);
    case "log": return 1 / x;
    case "sqrt": return 1 / (2 * Math.sqrt(x));
    case "rsqrt": return -0.5 * Math.pow(x, -1.5);
    case "gelu_tanh": {
      const c = Math.sqrt(2 / Math.PI);
      const u = c * (x + 0.044715 * x ** 3);
      const sech2 = 1 / Math.cosh(u) ** 2;
      return 0.5 * (1 + Math.tanh(u)) + 0.5 * x * sech2 * c * (1 + 3 * 0.044715 * x * x);
    }
    case "gelu_erf": return Phi(x) + (x * Math.exp(-(x * x) / 2)) / Math.sqrt(2 * Math.PI);
    case "silu": {
      const s = sigmoid(x);
      return s + x * s * (1 - s);
    }
    case "relu": return x > 0 ? 1 : 0;
    case "sigmoid": return sigmoid(x) * (1 - sigmoid(x));
    case "square": return 2 * x;
    case "abs": return x > 0 ? 1 : x < 0 ? -1 : 0;
  }
}

/** a op b for one pair. */
export function refBinary1(op: BinaryOp, a: number, b: number): number {
  switch (op) {
    case "add": return a + b;
    case "sub": return a - b;
    case "mul": return a * b;
    case "div": return a / b;
    case "max": return Math.max(a, b);
    case "min": return Math.min(a, b);
  }
}

/** Numpy-broadcast binary op: returns [out, outShape]. Index arithmetic by explicit multi-index. */
export function refBinary(op: BinaryOp, a: ArrayLike<number>, aShape: readonly number[], b: ArrayLike<number>, bShape: readonly number[]): [Float64Array, number[]] {
  const r = Math.max(aShape.length, bShape.length);
  const pa = [...new Array(r - aShape.length).fill(1), ...aShape];
  const pb = [...new Array(r - bShape.length).fill(1), ...bShape];
  const os = pa.map((d, i) => (d === 1 ? pb[i]! : d));
  const total = os.reduce((x, y) => x * y, 1);
  const out = new Float64Array(total);
  for (let flat = 0; flat < total; flat++) {
    // decompose flat into a multi-index
    let rem = flat;
    const idx = new Array<number>(r);
    for (let ax = r - 1; ax >= 0; ax--) {
      idx[ax] = rem % os[ax]!;
      rem = Math.floor(rem / os[ax]!);
    }
    let ia = 0;
    let ib = 0;
    for (let ax = 0; ax < r; ax++) {
      ia = ia * pa[ax]! + (pa[ax] === 1 ? 0 : idx[ax]!);
      ib = ib * pb[ax]! + (pb[ax] === 1 ? 0 : idx[ax]!);
    }
    out[flat] = refBinary1(op, a[ia]!, b[ib]!);
  }
  return [out, os];
}
