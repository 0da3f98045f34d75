/**
 * Optimizer-side ops on the cpu backend: fused AdamW/Adam step, sum of squares (for the global
 * gradient norm), and the inf/NaN check (for fp16 loss scaling).
 */

import type { AdamWParams, ClipScaleParams, DType, LambParams } from "../backend.ts";
import { CHUNK, decodeChunk, encodeHalves } from "./half-arrays.ts";
import type { FArr } from "./store.ts";

/** A float source that may be f32 storage or 16-bit bits. */
export interface FloatSource {
  a: FArr | Uint16Array;
  o: number;
  dtype: DType;
}

/** One AdamW step in place (PyTorch `torch.optim.AdamW` / DeepSpeed `adam_w_mode` order):
 * g ← grad·gradScale (+ wd·p when not decoupled); m ← β1 m + (1−β1) g; v ← β2 v + (1−β2) g²;
 * p ← p − lr·wd·p (decoupled only) − lr·(m/(1−β1^t)) / (√(v/(1−β2^t)) + eps).
 * When `p16` is given, its elements receive the new (stored) p rounded to nearest even (f16 or bf16).
 * Runs in chunks of {@link CHUNK} elements: a 16-bit grad chunk is decoded once into f32 scratch and
 * the chunk's p16 is encoded in one bulk loop (./half-arrays.ts); per element the arithmetic and
 * results are those of the plain loop. */
export function adamwF(param: FArr, po: number, grad: FloatSource, m: FArr, mo: number, v: FArr, vo: number, p16: { a: Uint16Array; o: number; dtype: DType } | null, n: number, hp: AdamWParams): void {
  const { lr, beta1, beta2, eps, weightDecay, decoupled, step, gradScale } = hp;
  const bc1 = 1 - Math.pow(beta1, step);
  const bc2 = 1 - Math.pow(beta2, step);
  for (let c0 = 0; c0 < n; c0 += CHUNK) {
    const len = Math.min(CHUNK, n - c0);
    const g = decodeChunk(grad.a, grad.o + c0, grad.dtype, len);
    const pb = po + c0;
    const mb = mo + c0;
    const vb = vo + c0;
    for (let i = 0; i < len; i++) {
      let p = param[pb + i]!;
      let gi = g[i]! * gradScale;
      if (!decoupled) gi += weightDecay * p;
      const mi = beta1 * m[mb + i]! + (1 - beta1) * gi;
      const vi = beta2 * v[vb + i]! + (1 - beta2) * gi * gi;
      m[mb + i] = mi;
      v[vb + i] = vi;
      if (decoupled) p -= lr * weightDecay * p;
      p -= (lr * (mi / bc1)) / (Math.sqrt(vi / bc2) + eps);
      param[pb + i] = p;
    }
    if (p16 !== null) encodeHalves(param, pb, p16.a, p16.o + c0, p16.dtype, len);
  }
}

/** Backend.clipScale in float64: Σ of `count` partials (ascending), then [coef / lsDiv, skip, Σ]
 * with norm = √Σ / lsDiv and coef = min(1, maxNorm / (norm + 1e-6)) (1 when maxNorm ≤ 0); skip = 1
 * and scale 0 when Σ is inf or NaN. The same arithmetic as core/src/optim/clip.ts. */
export function clipScaleF(part: FArr, po: number, count: number, p: ClipScaleParams): [number, number, number] {
  let sum = 0;
  for (let i = 0; i < count; i++) sum += part[po + i]!;
  if (!Number.isFinite(sum)) return [0, 1, sum];
  const norm = Math.sqrt(sum) / p.lsDiv;
  const coef = p.maxNorm > 0 ? Math.min(1, p.maxNorm / (norm + 1e-6)) : 1;
  return [coef / p.lsDiv, 0, sum];
}

/** AdamW with a device-side scale pair [scale, skip] (AdamWParams.scaleFrom): skip ≠ 0 leaves
 * param, m and v unchanged (a 16-bit copy is rewritten from the unchanged param); otherwise
 * {@link adamwF} with gradScale·scale. */
export function adamwScaledF(param: FArr, po: number, grad: FloatSource, m: FArr, mo: number, v: FArr, vo: number, p16: { a: Uint16Array; o: number; dtype: DType } | null, n: number, hp: AdamWParams, scale: number, skip: number): void {
  if (skip === 0) return adamwF(param, po, grad, m, mo, v, vo, p16, n, { ...hp, gradScale: hp.gradScale * scale });
  if (p16 !== null) encodeHalves(param, po, p16.a, p16.o, p16.dtype, n);
}

/** Σ x[i]² over i < n in a float64 accumulator, ascending order. */
export function sumSquaresF(x: FloatSource, n: number): number {
  let s = 0;
  if (x.dtype === "f32") {
    const a = x.a;
    for (let i = 0; i < n; i++) {
      const t = a[x.o + i]!;
      s += t * t;
    }
    return s;
  }
  for (let c0 = 0; c0 < n; c0 += CHUNK) {
    const len = Math.min(CHUNK, n - c0);
    const g = decodeChunk(x.a, x.o + c0, x.dtype, len);
    for (let i = 0; i < len; i++) {
      const t = g[i]!;
      s += t * t;
    }
  }
  return s;
}

/** True if any of n elements is ±inf or NaN (16-bit inputs tested on their exponent bits). */
export function nonFiniteF(x: FloatSource, n: number): boolean {
  const { a, o, dtype } = x;
  if (dtype === "f16") {
    for (let i = 0; i < n; i++) if ((a[o + i]! & 0x7c00) === 0x7c00) return true;
    return false;
  }
  if (dtype === "bf16") {
    for (let i = 0; i < n; i++) if ((a[o + i]! & 0x7f80) === 0x7f80) return true;
    return false;
  }
  for (let i = 0; i < n; i++) {
    const t = a[o + i]!;
    if (t - t !== 0) return true; // inf − inf and NaN − NaN are NaN
  }
  return false;
}

/** LAMB's first phase (DeepSpeed FusedLamb `lamb_cuda_kernel_part1`; You et al. 2019, Alg. 2):
 * g = grad·gradScale; m ← β1 m + (1−β1) g; v ← β2 v + (1−β2) g²;
 * update[i] = m/(√v + eps) + wd·p (√(v + eps) when epsInsideSqrt). m, v, update in place/out. */
export function lambUpdateF(param: FArr, po: number, grad: FloatSource, m: FArr, mo: number, v: FArr, vo: number, upd: FArr, uo: number, n: number, hp: LambParams): void {
  const { beta1, beta2, eps, epsInsideSqrt, weightDecay, gradScale } = hp;
  for (let c0 = 0; c0 < n; c0 += CHUNK) {
    const len = Math.min(CHUNK, n - c0);
    const g = decodeChunk(grad.a, grad.o + c0, grad.dtype, len);
    for (let j = 0; j < len; j++) {
      const i = c0 + j;
      const gi = g[j]! * gradScale;
      const mi = beta1 * m[mo + i]! + (1 - beta1) * gi;
      const vi = beta2 * v[vo + i]! + (1 - beta2) * gi * gi;
      m[mo + i] = mi;
      v[vo + i] = vi;
      const denom = epsInsideSqrt ? Math.sqrt(vi + eps) : Math.sqrt(vi) + eps;
      upd[uo + i] = mi / denom + weightDecay * param[po + i]!;
    }
  }
}
