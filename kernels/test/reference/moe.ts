/** Float64 reference for top-k (by stable sort), row gather, scatter-add and histogram. */

/** Top-k per row: sort indices by value descending, ties by index ascending (a stable sort). */
export function refTopk(x: ArrayLike<number>, rows: number, cols: number, k: number): { values: Float64Array; indices: Int32Array } {
  const values = new Float64Array(rows * k);
  const indices = new Int32Array(rows * k);
  for (let r = 0; r < rows; r++) {
    const order = Array.from({ length: cols }, (_, j) => j).sort((i, j) => x[r * cols + j]! - x[r * cols + i]! || i - j);
    for (let t = 0; t < k; t++) {
      indices[r * k + t] = order[t]!;
      values[r * k + t] = x[r * cols + order[t]!]!;
    }
  }
  return { values, indices };
}

/** out[i] = x[idx[i]] (zero row for −1). */
export function refGatherRows(x: ArrayLike<number>, idx: ArrayLike<number>, dim: number): Float64Array {
  const out = new Float64Array(idx.length * dim);
  for (let i = 0; i < idx.length; i++) if (idx[i] !== -1) for (let j = 0; j < dim; j++) out[i * dim + j] = x[idx[i]! * dim + j]!;
  return out;
}

/** out (copy of outInit)[idx[i]] += w_i·x[i] (w_i = 1 without weights; −1 skipped). */
export function refScatterAddRows(x: ArrayLike<number>, idx: ArrayLike<number>, weights: ArrayLike<number> | null, outInit: ArrayLike<number>, dim: number): Float64Array {
  const out = Float64Array.from(outInit);
  for (let i = 0; i < idx.length; i++) {
    if (idx[i] === -1) continue;
    const w = weights ? weights[i]! : 1;
    for (let j = 0; j < dim; j++) out[idx[i]! * dim + j] += w * x[i * dim + j]!;
  }
  return out;
}

/** counts[b] = number of i with idx[i] = b (others ignored). */
export function refHistogram(idx: ArrayLike<number>, bins: number): Uint32Array {
  const c = new Uint32Array(bins);
  for (let i = 0; i < idx.length; i++) if (idx[i]! >= 0 && idx[i]! < bins) c[idx[i]!]!++;
  return c;
}
