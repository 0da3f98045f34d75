/** Float64 reference for AdamW / Adam (Loshchilov & Hutter 2019, Algorithm 2; Kingma & Ba 2015). */

import type { AdamWParams } from "../../src/backend.ts";

/** One step on copies; returns new param, m, v. Classic Adam (decoupled false) adds wd·θ to g. */
export function refAdamw(param: ArrayLike<number>, grad: ArrayLike<number>, m: ArrayLike<number>, v: ArrayLike<number>, p: AdamWParams): { param: Float64Array; m: Float64Array; v: Float64Array } {
  const n = param.length;
  const P = new Float64Array(n);
  const Mo = new Float64Array(n);
  const Vo = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const th = param[i]!;
    const g = grad[i]! * p.gradScale + (p.decoupled ? 0 : p.weightDecay * th);
    Mo[i] = p.beta1 * m[i]! + (1 - p.beta1) * g;
    Vo[i] = p.beta2 * v[i]! + (1 - p.beta2) * g * g;
    const mh = Mo[i]! / (1 - p.beta1 ** p.step);
    const vh = Vo[i]! / (1 - p.beta2 ** p.step);
    P[i] = th - p.lr * (mh / (Math.sqrt(vh) + p.eps) + (p.decoupled ? p.weightDecay * th : 0));
  }
  return { param: P, m: Mo, v: Vo };
}
