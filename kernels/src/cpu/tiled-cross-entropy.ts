/**
 * Tiled softmax cross-entropy on the cpu backend: the three per-tile steps of a cross-entropy whose
 * logits are produced one [rows × cols] vocabulary tile at a time (the fused LM head + loss,
 * core/src/tensor/ops/linear-cross-entropy.ts). Float64 arithmetic in locals, columns ascending,
 * each stored value rounded to the buffer's precision; the online max/sum-exp merge follows
 * Milakov & Gimelshein 2018 ("Online normalizer calculation for softmax").
 *
 * Per-row state layout: stats[3r] = running max m, stats[3r + 1] = Σ exp(x − m) so far,
 * stats[3r + 2] = the target's logit x_t (0 until the tile holding column t_r was seen).
 */

import type { FArr } from "./store.ts";

/** Merge one tile (logits [rows, cols] = columns [col0, col0 + cols)) into the per-row state
 * (set it from the tile when `first`). Rows whose target is `ignoreIndex` are left untouched. */
export function ceTileStatsF(logits: FArr, lo: number, targets: Int32Array, to: number, stats: FArr, so: number, rows: number, cols: number, col0: number, ignoreIndex: number, first: boolean): void {
  for (let r = 0; r < rows; r++) {
    const t = targets[to + r]!;
    if (t === ignoreIndex) continue;
    const p = lo + r * cols;
    let mx = -Infinity;
    for (let j = 0; j < cols; j++) if (logits[p + j]! > mx) mx = logits[p + j]!;
    const q = so + 3 * r;
    const m0 = first ? -Infinity : stats[q]!;
    const s0 = first ? 0 : stats[q + 1]!;
    const m = Math.max(m0, mx);
    let s = s0 === 0 ? 0 : s0 * Math.exp(m0 - m);
    for (let j = 0; j < cols; j++) s += Math.exp(logits[p + j]! - m);
    stats[q] = m;
    stats[q + 1] = s;
    if (t >= col0 && t < col0 + cols) stats[q + 2] = logits[p + t - col0]!;
    else if (first) stats[q + 2] = 0;
  }
}

/** After the last tile: lse[r] = m + log s and losses[r] = lse − x_t + zLoss·lse² for each row
 * whose target is not `ignoreIndex` (both 0 for ignored rows). Throws if a target is outside
 * [0, vocab) and not ignoreIndex (row and value named). */
export function ceTileFinishF(stats: FArr, so: number, targets: Int32Array, to: number, lse: FArr, eo: number, losses: FArr, lo: number, rows: number, vocab: number, ignoreIndex: number, zLoss: number): void {
  for (let r = 0; r < rows; r++) {
    const t = targets[to + r]!;
    if (t === ignoreIndex) {
      lse[eo + r] = 0;
      losses[lo + r] = 0;
      continue;
    }
    if (t < 0 || t >= vocab) throw new Error(`cpu crossEntropyTileFinish: targets[${r}] = ${t} is outside [0, ${vocab}) and is not ignoreIndex ${ignoreIndex}`);
    const q = so + 3 * r;
    const l = stats[q]! + Math.log(stats[q + 1]!);
    lse[eo + r] = l;
    losses[lo + r] = l - stats[q + 2]! + zLoss * l * l;
  }
}

/** Backward of one tile in place: logits[r, j] ← g·gradScale·(exp(x − lse_r)·(1 + 2·zLoss·lse_r)
 * − [col0 + j = t_r]) for valid rows, 0 for rows whose target is `ignoreIndex`. */
export function ceTileBackwardF(logits: FArr, lo: number, targets: Int32Array, to: number, lse: FArr, eo: number, g: number, rows: number, cols: number, col0: number, ignoreIndex: number, gradScale: number, zLoss: number): void {
  for (let r = 0; r < rows; r++) {
    const t = targets[to + r]!;
    const p = lo + r * cols;
    if (t === ignoreIndex) {
      for (let j = 0; j < cols; j++) logits[p + j] = 0;
      continue;
    }
    const l = lse[eo + r]!;
    const a = g * gradScale;
    const zf = 1 + 2 * zLoss * l;
    for (let j = 0; j < cols; j++) {
      const pj = Math.exp(logits[p + j]! - l) * zf;
      logits[p + j] = (col0 + j === t ? pj - 1 : pj) * a;
    }
  }
}
