/**
 * Elementwise f32 ops of the cpu backend: unary (+ backward), affine, broadcasting binary, axpy.
 * Each value is computed in float64 and stored into the output array (rounded to f32 in "f32"
 * precision, exact in "f64").
 */

import type { BinaryOp, UnaryOp } from "../backend.ts";
import { erf } from "./erf.ts";
import type { FArr } from "./store.ts";

const SQRT_2_OVER_PI = 0.7978845608028654; // √(2/π), GELU tanh approximation (Hendrycks & Gimpel 2016)
const GELU_C = 0.044715;
const INV_SQRT2 = 0.7071067811865476;
const INV_SQRT_2PI = 0.3989422804014327;

/** y[yo+i] = op(x[xo+i]) for i < n. Throws on an unknown op. */
export function unaryF(op: UnaryOp, x: FArr, xo: number, y: FArr, yo: number, n: number): void {
  switch (op) {
    case "neg":
      for (let i = 0; i < n; i++) y[yo + i] = -x[xo + i]!;
      return;
    case "exp":
      for (let i = 0; i < n; i++) y[yo + i] = Math.exp(x[xo + i]!);
      return;
    case "log":
      for (let i = 0; i < n; i++) y[yo + i] = Math.log(x[xo + i]!);
      return;
    case "sqrt":
      for (let i = 0; i < n; i++) y[yo + i] = Math.sqrt(x[xo + i]!);
      return;
    case "rsqrt":
      for (let i = 0; i < n; i++) y[yo + i] = 1 / Math.sqrt(x[xo + i]!);
      return;
    case "gelu_tanh":
      for (let i = 0; i < n; i++) {
        const v = x[xo + i]!;
        y[yo + i] = 0.5 * v * (1 + Math.tanh(SQRT_2_OVER_PI * (v + GELU_C * v * v * v)));
      }
      return;
    case "gelu_erf":
      for (let i = 0; i < n; i++) {
        const v = x[xo + i]!;
        y[yo + i] = 0.5 * v * (1 + erf(v * INV_SQRT2));
      }
      return;
    case "silu":
      for (let i = 0; i < n; i++) {
        const v = x[xo + i]!;
        y[yo + i] = v / (1 + Math.exp(-v));
      }
      return;
    case "relu":
      for (let i = 0; i < n; i++) {
        const v = x[xo + i]!;
        y[yo + i] = v > 0 ? v : 0;
      }
      return;
    case "sigmoid":
      for (let i = 0; i < n; i++) y[yo + i] = 1 / (1 + Math.exp(-x[xo + i]!));
      return;
    case "square":
      for (let i = 0; i < n; i++) {
        const v = x[xo + i]!;
        y[yo + i] = v * v;
      }
      return;
    case "abs":
      for (let i = 0; i < n; i++) y[yo + i] = Math.abs(x[xo + i]!);
      return;
    default:
      throw new Error(`cpu unary: unknown op "${op as string}"`);
  }
}

/** dx[i] = dy[i] · op'(x[i]) for i < n, x the forward input. relu'(0) = 0, abs'(0) = 0. */
export function unaryBackwardF(op: UnaryOp, x: FArr, xo: number, dy: FArr, dyo: number, dx: FArr, dxo: number, n: number): void {
  switch (op) {
    case "neg":
      for (let i = 0; i < n; i++) dx[dxo + i] = -dy[dyo + i]!;
      return;
    case "exp":
      for (let i = 0; i < n; i++) dx[dxo + i] = dy[dyo + i]! * Math.exp(x[xo + i]!);
      return;
    case "log":
      for (let i = 0; i < n; i++) dx[dxo + i] = dy[dyo + i]! / x[xo + i]!;
      return;
    case "sqrt":
      for (let i = 0; i < n; i++) dx[dxo + i] = (0.5 * dy[dyo + i]!) / Math.sqrt(x[xo + i]!);
      return;
    case "rsqrt":
      for (let i = 0; i < n; i++) {
        const v = x[xo + i]!;
        dx[dxo + i] = (-0.5 * dy[dyo + i]!) / (v * Math.sqrt(v));
      }
      return;
    case "gelu_tanh":
      for (let i = 0; i < n; i++) {
        const v = x[xo + i]!;
        const t = Math.tanh(SQRT_2_OVER_PI * (v + GELU_C * v * v * v));
        const d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * GELU_C * v * v);
        dx[dxo + i] = dy[dyo + i]! * d;
      }
      return;
    case "gelu_erf":
      for (let i = 0; i < n; i++) {
        const v = x[xo + i]!;
        const d = 0.5 * (1 + erf(v * INV_SQRT2)) + v * INV_SQRT_2PI * Math.exp(-0.5 * v * v);
        dx[dxo + i] = dy[dyo + i]! * d;
      }
      return;
    case "silu":
      for (let i = 0; i < n; i++) {
        const v = x[xo + i]!;
        const s = 1 / (1 + Math.exp(-v));
        dx[dxo + i] = dy[dyo + i]! * s * (1 + v * (1 - s));
      }
      return;
    case "relu":
      for (let i = 0; i < n; i++) dx[dxo + i] = x[xo + i]! > 0 ? dy[dyo + i]! : 0;
      return;
    case "sigmoid":
      for (let i = 0; i < n; i++) {
        const s = 1 / (1 + Math.exp(-x[xo + i]!));
        dx[dxo + i] = dy[dyo + i]! * s * (1 - s);
      }
      return;
    case "square":
      for (let i = 0; i < n; i++) dx[dxo + i] = 2 * x[xo + i]! * dy[dyo + i]!;
      return;
    case "abs":
      for (let i = 0; i < n; i++) {
        const v = x[xo + i]!;
        dx[dxo + i] = v > 0 ? dy[dyo + i]! : v < 0 ? -dy[dyo + i]! : 0;
      }
      return;
    default:
      throw new Error(`cpu unaryBackward: unknown op "${op as string}"`);
  }
}

/** y[i] = alpha·x[i] + beta for i < n (in place allowed). */
export function affineF(x: FArr, xo: number, y: FArr, yo: number, n: number, alpha: number, beta: number): void {
  for (let i = 0; i < n; i++) y[yo + i] = alpha * x[xo + i]! + beta;
}

/** y[i] += alpha·x[i] for i < n. */
export function axpyF(alpha: number, x: FArr, xo: number, y: FArr, yo: number, n: number): void {
  for (let i = 0; i < n; i++) y[yo + i] = y[yo + i]! + alpha * x[xo + i]!;
}

/** Numpy broadcast of two shapes (right-aligned). Throws naming both shapes if they don't broadcast. */
export function broadcastShape(aShape: readonly number[], bShape: readonly number[]): number[] {
  const r = Math.max(aShape.length, bShape.length);
  const out: number[] = new Array(r);
  for (let i = 0; i < r; i++) {
    const da = aShape[aShape.length - r + i] ?? 1;
    const db = bShape[bShape.length - r + i] ?? 1;
    if (!Number.isInteger(da) || da < 0 || !Number.isInteger(db) || db < 0) throw new Error(`cpu binary: shapes must hold non-negative integers, got [${aShape}] and [${bShape}]`);
    if (da !== db && da !== 1 && db !== 1) throw new Error(`cpu binary: shapes [${aShape}] and [${bShape}] do not broadcast (axis ${i - r} is ${da} vs ${db})`);
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/** Product of dims (1 for a scalar shape). */
export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** out = a op b on one contiguous output row of `len`, inputs stepping by sa/sb (0 broadcasts). */
function rowOp(op: BinaryOp, a: FArr, ao: number, sa: number, b: FArr, bo: number, sb: number, out: FArr, oo: number, len: number): void {
  switch (op) {
    case "add":
      for (let j = 0; j < len; j++) out[oo + j] = a[ao + j * sa]! + b[bo + j * sb]!;
      return;
    case "sub":
      for (let j = 0; j < len; j++) out[oo + j] = a[ao + j * sa]! - b[bo + j * sb]!;
      return;
    case "mul":
      for (let j = 0; j < len; j++) out[oo + j] = a[ao + j * sa]! * b[bo + j * sb]!;
      return;
    case "div":
      for (let j = 0; j < len; j++) out[oo + j] = a[ao + j * sa]! / b[bo + j * sb]!;
      return;
    case "max":
      for (let j = 0; j < len; j++) out[oo + j] = Math.max(a[ao + j * sa]!, b[bo + j * sb]!);
      return;
    case "min":
      for (let j = 0; j < len; j++) out[oo + j] = Math.min(a[ao + j * sa]!, b[bo + j * sb]!);
      return;
    default:
      throw new Error(`cpu binary: unknown op "${op as string}"`);
  }
}

/** Element strides of `shape` padded on the left to rank r, with 0 on broadcast axes. */
function bstrides(shape: readonly number[], outShape: readonly number[]): number[] {
  const r = outShape.length;
  const s: number[] = new Array(r).fill(0);
  let acc = 1;
  for (let i = r - 1; i >= 0; i--) {
    const d = shape[shape.length - r + i] ?? 1;
    s[i] = d === 1 && outShape[i] !== 1 ? 0 : acc;
    acc *= d;
  }
  return s;
}

/** out = a op b with numpy broadcasting; `out` holds numel(broadcastShape) elements from `oo`.
 * Iterates the output in row-major order, the last axis innermost. */
export function binaryF(op: BinaryOp, a: FArr, ao: number, aShape: readonly number[], b: FArr, bo: number, bShape: readonly number[], out: FArr, oo: number): void {
  const os = broadcastShape(aShape, bShape);
  const total = numel(os);
  if (total === 0) return;
  const r = os.length;
  if (r === 0) {
    rowOp(op, a, ao, 0, b, bo, 0, out, oo, 1);
    return;
  }
  const sa = bstrides(aShape, os);
  const sb = bstrides(bShape, os);
  const len = os[r - 1]!;
  const rows = total / len;
  const idx = new Array<number>(r).fill(0);
  let pa = ao;
  let pb = bo;
  for (let row = 0; row < rows; row++) {
    rowOp(op, a, pa, sa[r - 1]!, b, pb, sb[r - 1]!, out, oo + row * len, len);
    // advance the multi-index over axes 0..r-2
    for (let ax = r - 2; ax >= 0; ax--) {
      idx[ax]!++;
      pa += sa[ax]!;
      pb += sb[ax]!;
      if (idx[ax]! < os[ax]!) break;
      pa -= sa[ax]! * os[ax]!;
      pb -= sb[ax]! * os[ax]!;
      idx[ax] = 0;
    }
  }
}
