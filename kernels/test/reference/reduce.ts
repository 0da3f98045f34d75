/** Float64 reference for the middle-axis reduction of an [outer, n, inner] array. */

import type { ReduceOp } from "../../src/backend.ts";

/** out[o][i] = op_j x[o][j][i]; also returns the magnitude Σ_j |term| (for tolerances). */
export function refReduce(op: ReduceOp, x: ArrayLike<number>, outer: number, n: number, inner: number): { out: Float64Array; mag: Float64Array } {
  const out = new Float64Array(outer * inner);
  const mag = new Float64Array(outer * inner);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const vals: number[] = [];
      for (let j = 0; j < n; j++) vals.push(x[(o * n + j) * inner + i]!);
      let r: number;
      if (op === "max") r = Math.max(...vals);
      else if (op === "sumsq") r = vals.reduce((s, v) => s + v * v, 0);
      else {
        r = vals.reduce((s, v) => s + v, 0);
        if (op === "mean") r /= n;
      }
      out[o * inner + i] = r;
      const m = op === "sumsq" ? vals.reduce((s, v) => s + v * v, 0) : vals.reduce((s, v) => s + Math.abs(v), 0);
      mag[o * inner + i] = op === "mean" ? m / n : op === "max" ? 0 : m;
    }
  }
  return { out, mag };
}
