/**
 * Row softmax / log-softmax and their backward on the cpu backend. Max-subtracted, float64
 * accumulation, columns summed in ascending order (docs/domain.md §5).
 */

import type { FArr } from "./store.ts";

/** y = softmax(x) (or log_softmax when `log`) over each of `rows` rows of `cols`. In place allowed. */
export function softmaxF(x: FArr, xo: number, y: FArr, yo: number, rows: number, cols: number, log: boolean): void {
  for (let r = 0; r < rows; r++) {
    const p = xo + r * cols;
    const q = yo + r * cols;
    let mx = -Infinity;
    for (let j = 0; j < cols; j++) if (x[p + j]! > mx) mx = x[p + j]!;
    let s = 0;
    for (let j = 0; j < cols; j++) s += Math.exp(x[p + j]! - mx);
    if (log) {
      const lse = mx + Math.log(s);
      for (let j = 0; j < cols; j++) y[q + j] = x[p + j]! - lse;
    } else {
      const inv = 1 / s;
      for (let j = 0; j < cols; j++) y[q + j] = Math.exp(x[p + j]! - mx) * inv;
    }
  }
}

/** Backward given forward output y: softmax dx = y ⊙ (dy − Σ dy·y); log-softmax
 * dx = dy − exp(y) · Σ dy. */
export function softmaxBackwardF(y: FArr, yo: number, dy: FArr, dyo: number, dx: FArr, dxo: number, rows: number, cols: number, log: boolean): void {
  for (let r = 0; r < rows; r++) {
    const p = yo + r * cols;
    const g = dyo + r * cols;
    const q = dxo + r * cols;
    if (log) {
      let s = 0;
      for (let j = 0; j < cols; j++) s += dy[g + j]!;
      for (let j = 0; j < cols; j++) dx[q + j] = dy[g + j]! - Math.exp(y[p + j]!) * s;
    } else {
      let s = 0;
      for (let j = 0; j < cols; j++) s += dy[g + j]! * y[p + j]!;
      for (let j = 0; j < cols; j++) dx[q + j] = y[p + j]! * (dy[g + j]! - s);
    }
  }
}
