/**
 * Reductions of the cpu backend: middle-axis reduce of an [outer, n, inner] array. Sums run in a
 * float64 accumulator over the reduced index in ascending order (fixed order → deterministic).
 */

import type { ReduceOp } from "../backend.ts";
import type { FArr } from "./store.ts";

/** out[o, i] = op over j < n of x[o, j, i]; x is [outer, n, inner], out [outer, inner].
 * Empty reductions (n = 0): sum/sumsq 0, mean NaN, max −inf. */
export function reduceF(op: ReduceOp, x: FArr, xo: number, out: FArr, oo: number, outer: number, n: number, inner: number): void {
  if (op !== "sum" && op !== "mean" && op !== "max" && op !== "sumsq") throw new Error(`cpu reduce: unknown op "${op as string}"`);
  const acc = new Float64Array(inner);
  for (let o = 0; o < outer; o++) {
    const base = xo + o * n * inner;
    acc.fill(op === "max" ? -Infinity : 0);
    for (let j = 0; j < n; j++) {
      const p = base + j * inner;
      if (op === "max") {
        for (let i = 0; i < inner; i++) {
          const v = x[p + i]!;
          if (v > acc[i]! || Number.isNaN(v)) acc[i] = v;
        }
      } else if (op === "sumsq") {
        for (let i = 0; i < inner; i++) {
          const v = x[p + i]!;
          acc[i] = acc[i]! + v * v;
        }
      } else {
        for (let i = 0; i < inner; i++) acc[i] = acc[i]! + x[p + i]!;
      }
    }
    const q = oo + o * inner;
    if (op === "mean") for (let i = 0; i < inner; i++) out[q + i] = acc[i]! / n;
    else for (let i = 0; i < inner; i++) out[q + i] = acc[i]!;
  }
}
