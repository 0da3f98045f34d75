/**
 * Fused softmax cross-entropy forward + backward on the cpu backend (max-subtracted logsumexp in
 * float64, columns ascending).
 */

import type { FArr } from "./store.ts";

/** losses[r] = logsumexp(logits_r) − logits_r[t_r]; dlogits_r = (softmax(logits_r) − onehot(t_r))·gradScale.
 * Rows with t_r = ignoreIndex get loss 0 and a zero gradient row. Throws if another target lies
 * outside [0, vocab) (row and value named). */
export function crossEntropyF(logits: FArr, lo: number, targets: Int32Array, to: number, losses: FArr, so: number, dlogits: FArr, dlo: number, rows: number, vocab: number, ignoreIndex: number, gradScale: number): void {
  for (let r = 0; r < rows; r++) {
    const t = targets[to + r]!;
    const p = lo + r * vocab;
    const q = dlo + r * vocab;
    if (t === ignoreIndex) {
      losses[so + r] = 0;
      for (let j = 0; j < vocab; j++) dlogits[q + j] = 0;
      continue;
    }
    if (t < 0 || t >= vocab) throw new Error(`cpu crossEntropy: targets[${r}] = ${t} is outside [0, ${vocab}) and is not ignoreIndex ${ignoreIndex}`);
    let mx = -Infinity;
    for (let j = 0; j < vocab; j++) if (logits[p + j]! > mx) mx = logits[p + j]!;
    let s = 0;
    for (let j = 0; j < vocab; j++) s += Math.exp(logits[p + j]! - mx);
    const lse = mx + Math.log(s);
    losses[so + r] = lse - logits[p + t]!;
    const inv = 1 / s;
    for (let j = 0; j < vocab; j++) {
      const pj = Math.exp(logits[p + j]! - mx) * inv;
      dlogits[q + j] = (j === t ? pj - 1 : pj) * gradScale;
    }
  }
}
