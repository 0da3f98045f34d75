/**
 * MoE routing primitives on the cpu backend: top-k, row gather, weighted row scatter-add, and
 * histogram. All loops run in ascending index order (deterministic).
 */

import type { FArr } from "./store.ts";

/** Top-k of each row of x [rows, cols] (k ≤ cols): values and indices [rows, k], descending, ties
 * by lower index first (a later element must be strictly greater to pass an earlier one). NaN is
 * treated as smaller than every number. */
export function topkF(x: FArr, xo: number, values: FArr, vo: number, indices: Int32Array, io: number, rows: number, cols: number, k: number): void {
  const bv = new Float64Array(k);
  const bi = new Int32Array(k);
  for (let r = 0; r < rows; r++) {
    const p = xo + r * cols;
    let cnt = 0;
    for (let j = 0; j < cols; j++) {
      const val = x[p + j]!;
      if (Number.isNaN(val)) continue;
      if (cnt === k && !(val > bv[k - 1]!)) continue;
      // insert after every kept element with value >= val
      let pos = cnt < k ? cnt : k - 1;
      while (pos > 0 && bv[pos - 1]! < val) {
        bv[pos] = bv[pos - 1]!;
        bi[pos] = bi[pos - 1]!;
        pos--;
      }
      bv[pos] = val;
      bi[pos] = j;
      if (cnt < k) cnt++;
    }
    // rows with NaNs may leave slots: fill with NaN entries in ascending index order
    if (cnt < k) {
      for (let j = 0; j < cols && cnt < k; j++) {
        if (Number.isNaN(x[p + j]!)) {
          bv[cnt] = NaN;
          bi[cnt] = j;
          cnt++;
        }
      }
    }
    const q = r * k;
    for (let t = 0; t < k; t++) {
      values[vo + q + t] = bv[t]!;
      indices[io + q + t] = bi[t]!;
    }
  }
}

/** out[i, :] = x[idx[i], :] for i < n; idx −1 gives a zero row. `rowsX` is how many rows x holds;
 * other indices outside [0, rowsX) throw (naming i and the value). */
export function gatherRowsF(x: FArr, xo: number, rowsX: number, idx: Int32Array, io: number, out: FArr, oo: number, n: number, dim: number): void {
  for (let i = 0; i < n; i++) {
    const s = idx[io + i]!;
    const q = oo + i * dim;
    if (s === -1) {
      for (let j = 0; j < dim; j++) out[q + j] = 0;
      continue;
    }
    if (s < 0 || s >= rowsX) throw new Error(`cpu gatherRows: idx[${i}] = ${s} is outside [0, ${rowsX}) and is not −1`);
    const p = xo + s * dim;
    for (let j = 0; j < dim; j++) out[q + j] = x[p + j]!;
  }
}

/** out[idx[i], :] += w_i · x[i, :] for i ascending (w_i = weights[i] or 1); idx −1 skipped; other
 * indices outside [0, rowsOut) throw. */
export function scatterAddRowsF(x: FArr, xo: number, idx: Int32Array, io: number, weights: FArr | null, wo: number, out: FArr, oo: number, rowsOut: number, n: number, dim: number): void {
  for (let i = 0; i < n; i++) {
    const d = idx[io + i]!;
    if (d === -1) continue;
    if (d < 0 || d >= rowsOut) throw new Error(`cpu scatterAddRows: idx[${i}] = ${d} is outside [0, ${rowsOut}) and is not −1`);
    const w = weights === null ? 1 : weights[wo + i]!;
    const p = xo + i * dim;
    const q = oo + d * dim;
    for (let j = 0; j < dim; j++) out[q + j] = out[q + j]! + w * x[p + j]!;
  }
}

/** counts[b] = #{i < n : idx[i] = b} for b < bins (overwritten); out-of-range indices ignored. */
export function histogramF(idx: Int32Array, io: number, counts: Uint32Array, co: number, n: number, bins: number): void {
  for (let b = 0; b < bins; b++) counts[co + b] = 0;
  for (let i = 0; i < n; i++) {
    const v = idx[io + i]!;
    if (v >= 0 && v < bins) counts[co + v] = counts[co + v]! + 1;
  }
}

/** The stable counting sort of pairs by expert (Backend.moePermute): counts, offsets, rowOfPair,
 * tokenOfRow, pairOfRow (all Int32Array storages at their offsets). Pairs of one expert keep pair
 * order; a pair with an expert outside [0, bins) is dropped (row −1); rows past the kept total get
 * token and pair −1. */
export function moePermuteF(idx: Int32Array, io: number, n: number, topK: number, bins: number, counts: Int32Array, co: number, offsets: Int32Array, oo: number, rowOfPair: Int32Array, rpo: number, tokenOfRow: Int32Array, tro: number, pairOfRow: Int32Array, pro: number): void {
  for (let e = 0; e < bins; e++) counts[co + e] = 0;
  for (let p = 0; p < n; p++) {
    const e = idx[io + p]!;
    if (e >= 0 && e < bins) counts[co + e]!++;
  }
  let acc = 0;
  const cursor = new Int32Array(bins);
  for (let e = 0; e < bins; e++) {
    offsets[oo + e] = acc;
    cursor[e] = acc;
    acc += counts[co + e]!;
  }
  offsets[oo + bins] = acc;
  for (let p = 0; p < n; p++) {
    const e = idx[io + p]!;
    if (e < 0 || e >= bins) {
      rowOfPair[rpo + p] = -1;
      continue;
    }
    const r = cursor[e]!++;
    rowOfPair[rpo + p] = r;
    tokenOfRow[tro + r] = Math.floor(p / topK);
    pairOfRow[pro + r] = p;
  }
  for (let r = acc; r < n; r++) {
    tokenOfRow[tro + r] = -1;
    pairOfRow[pro + r] = -1;
  }
}

/** The combine per token in expert order (Backend.moeCombine): out[t] = (accumulate ? out[t] : 0)
 * + Σ_{pairs of t by ascending row} w_p·x[row] (w_p = 1 without weights), one term at a time.
 * @throws on a row outside [−1, xRows). */
export function moeCombineF(x: FArr, xo: number, xRows: number, rowOfPair: Int32Array, rpo: number, weights: FArr | null, wo: number, out: FArr, oo: number, tokens: number, topK: number, dim: number, accumulate: boolean): void {
  const rows: number[] = [];
  const pairs: number[] = [];
  for (let t = 0; t < tokens; t++) {
    rows.length = 0;
    pairs.length = 0;
    for (let s = 0; s < topK; s++) {
      const p = t * topK + s;
      const r = rowOfPair[rpo + p]!;
      if (r === -1) continue;
      if (r < -1 || r >= xRows) throw new Error(`cpu moeCombine: rowOfPair[${p}] = ${r} is outside [0, ${xRows}) and is not −1`);
      let q = rows.length;
      rows.push(r);
      pairs.push(p);
      while (q > 0 && rows[q - 1]! > r) {
        rows[q] = rows[q - 1]!;
        pairs[q] = pairs[q - 1]!;
        q--;
      }
      rows[q] = r;
      pairs[q] = p;
    }
    const q0 = oo + t * dim;
    if (!accumulate) for (let j = 0; j < dim; j++) out[q0 + j] = 0;
    for (let i = 0; i < rows.length; i++) {
      const w = weights === null ? 1 : weights[wo + pairs[i]!]!;
      const p0 = xo + rows[i]! * dim;
      for (let j = 0; j < dim; j++) out[q0 + j] = out[q0 + j]! + w * x[p0 + j]!;
    }
  }
}

/** out[r·k + s] = x[r·cols + idx[r·k + s]] (0 for an index outside [0, cols)). */
export function gatherAlongRowsF(x: FArr, xo: number, idx: Int32Array, io: number, out: FArr, oo: number, rows: number, cols: number, k: number): void {
  for (let r = 0; r < rows; r++) {
    for (let s = 0; s < k; s++) {
      const c = idx[io + r * k + s]!;
      out[oo + r * k + s] = c >= 0 && c < cols ? x[xo + r * cols + c]! : 0;
    }
  }
}

/** dx[r·cols + idx[r·k + s]] += dout[r·k + s], s ascending (indices outside [0, cols) skipped). */
export function scatterAddAlongRowsF(dout: FArr, go: number, idx: Int32Array, io: number, dx: FArr, xo: number, rows: number, cols: number, k: number): void {
  for (let r = 0; r < rows; r++) {
    for (let s = 0; s < k; s++) {
      const c = idx[io + r * k + s]!;
      if (c >= 0 && c < cols) dx[xo + r * cols + c] = dx[xo + r * cols + c]! + dout[go + r * k + s]!;
    }
  }
}
