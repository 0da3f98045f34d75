/**
 * Rotary position embedding (Su et al. 2021, "RoFormer") in the Hugging Face Llama "rotate_half"
 * layout on the cpu backend: for i < D/2 the pair (x_i, x_{i+D/2}) at position pos is rotated by
 * angle pos·θ^(−2i/D). Angles and sines/cosines are computed in float64.
 */

import type { FArr } from "./store.ts";

/** y = rope(x) for x [batch, seq, heads, headDim] (in place allowed); `inverse` rotates by −angle.
 * `freq`: the base theta, or the headDim/2 inverse frequencies (scaled RoPE). headDim must be even
 * (checked by the caller). */
export function ropeF(x: FArr, xo: number, y: FArr, yo: number, batch: number, seq: number, heads: number, headDim: number, freq: number | Float64Array, inverse: boolean): void {
  const half = headDim / 2;
  let invFreq: Float64Array;
  if (typeof freq === "number") {
    invFreq = new Float64Array(half);
    for (let i = 0; i < half; i++) invFreq[i] = Math.pow(freq, (-2 * i) / headDim);
  } else {
    if (freq.length !== half) throw new Error(`rope: ${freq.length} inverse frequencies for head dim ${headDim} (expected ${half})`);
    invFreq = freq;
  }
  const cos = new Float64Array(half);
  const sin = new Float64Array(half);
  const sgn = inverse ? -1 : 1;
  for (let s = 0; s < seq; s++) {
    for (let i = 0; i < half; i++) {
      const ang = s * invFreq[i]!;
      cos[i] = Math.cos(ang);
      sin[i] = sgn * Math.sin(ang);
    }
    for (let b = 0; b < batch; b++) {
      for (let h = 0; h < heads; h++) {
        const base = ((b * seq + s) * heads + h) * headDim;
        const p = xo + base;
        const q = yo + base;
        for (let i = 0; i < half; i++) {
          const x1 = x[p + i]!;
          const x2 = x[p + i + half]!;
          y[q + i] = x1 * cos[i]! - x2 * sin[i]!;
          y[q + i + half] = x2 * cos[i]! + x1 * sin[i]!;
        }
      }
    }
  }
}
