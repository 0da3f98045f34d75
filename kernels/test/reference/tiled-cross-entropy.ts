/** Float64 reference of the tiled cross-entropy (backend `crossEntropyTileStats/Finish/Backward`):
 * whole-row logsumexp, loss with PaLM's z-loss, and the gradient of the logits. */

/** For each row: lse = log Σ_j exp(x_j) (max subtracted), loss = lse − x_t + z·lse², and
 * dlogits = g·gradScale·(softmax·(1 + 2z·lse) − onehot); all 0 for rows whose target is
 * `ignoreIndex`. logits [rows, vocab]. */
export function refTiledCrossEntropy(logits: ArrayLike<number>, targets: ArrayLike<number>, rows: number, vocab: number, ignoreIndex: number, z: number, g: number, gradScale: number): { lse: Float64Array; losses: Float64Array; dlogits: Float64Array } {
  const lse = new Float64Array(rows);
  const losses = new Float64Array(rows);
  const dlogits = new Float64Array(rows * vocab);
  for (let r = 0; r < rows; r++) {
    const t = targets[r]!;
    if (t === ignoreIndex) continue;
    let m = -Infinity;
    for (let j = 0; j < vocab; j++) m = Math.max(m, logits[r * vocab + j]!);
    let s = 0;
    for (let j = 0; j < vocab; j++) s += Math.exp(logits[r * vocab + j]! - m);
    const l = m + Math.log(s);
    lse[r] = l;
    losses[r] = l - logits[r * vocab + t]! + z * l * l;
    for (let j = 0; j < vocab; j++) dlogits[r * vocab + j] = (Math.exp(logits[r * vocab + j]! - l) * (1 + 2 * z * l) - (j === t ? 1 : 0)) * g * gradScale;
  }
  return { lse, losses, dlogits };
}
