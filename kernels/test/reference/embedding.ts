/** Float64 reference for embedding lookup/backward and fused softmax cross-entropy. */

/** out[i] = table[ids[i]] (zero row when ids[i] ∉ [0, vocab)). */
export function refEmbedding(table: ArrayLike<number>, vocab: number, ids: ArrayLike<number>, dim: number): Float64Array {
  const out = new Float64Array(ids.length * dim);
  ids = Array.from(ids);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (id < 0 || id >= vocab) continue;
    for (let j = 0; j < dim; j++) out[i * dim + j] = table[id * dim + j]!;
  }
  return out;
}

/** dtable (copy of dtableInit) += scatter of dout rows by ids (ids ∉ [0, vocab) skipped). */
export function refEmbeddingBackward(dout: ArrayLike<number>, ids: ArrayLike<number>, dtableInit: ArrayLike<number>, vocab: number, dim: number): Float64Array {
  const dt = Float64Array.from(dtableInit);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (id < 0 || id >= vocab) continue;
    for (let j = 0; j < dim; j++) dt[id * dim + j] += dout[i * dim + j]!;
  }
  return dt;
}

/** losses[r] = −log softmax(logits_r)[t_r]; dlogits = (softmax − onehot)·gradScale; ignored rows 0. */
export function refCrossEntropy(logits: ArrayLike<number>, targets: ArrayLike<number>, rows: number, vocab: number, ignoreIndex: number, gradScale: number): { losses: Float64Array; dlogits: Float64Array } {
  const losses = new Float64Array(rows);
  const dlogits = new Float64Array(rows * vocab);
  for (let r = 0; r < rows; r++) {
    const t = targets[r]!;
    if (t === ignoreIndex) continue;
    const row = Array.from({ length: vocab }, (_, j) => logits[r * vocab + j]!);
    const m = Math.max(...row);
    const z = row.reduce((s, v) => s + Math.exp(v - m), 0);
    losses[r] = -(row[t]! - m - Math.log(z));
    for (let j = 0; j < vocab; j++) dlogits[r * vocab + j] = (Math.exp(row[j]! - m) / z - (j === t ? 1 : 0)) * gradScale;
  }
  return { losses, dlogits };
}
