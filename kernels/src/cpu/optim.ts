/**
 * Optimizer-side ops on the cpu backend: fused AdamW/Adam step, sum of squares (for the global
 * gradient norm), and the inf/NaN check (for fp16 loss scaling).
 */

import type { AdamWParams, ClipScaleParams, DType, LambParams } from "../backend.ts";
import { bf16FromNumber, bf16ToNumber } from "../numerics/bf16.ts";
import { f16FromNumber, f16ToNumber } from "../numerics/f16.ts";
import type { FArr } from "./store.ts";

/** A float source that may be f32 storage or 16-bit bits. */
export interface FloatSource {
  a: FArr | Uint16Array;
  o: number;
  dtype: DType;
}

/** Decoder for element i of a float source (f32 storage read directly; f16/bf16 decoded). */
function decoder(src: FloatSource): (i: number) => number {
  const { a, o, dtype } = src;
  if (dtype === "f16") return (i) => f16ToNumber(a[o + i]!);
  if (dtype === "bf16") return (i) => bf16ToNumber(a[o + i]!);
  return (i) => a[o + i]!;
}

/** One AdamW step in place (PyTorch `torch.optim.AdamW` / DeepSpeed `adam_w_mode` order):
 * g ← grad·gradScale (+ wd·p when not decoupled); m ← β1 m + (1−β1) g; v ← β2 v + (1−β2) g²;
 * p ← p − lr·wd·p (decoupled only) − lr·(m/(1−β1^t)) / (√(v/(1−β2^t)) + eps).
 * When `p16` is given, its elements receive the new p rounded to nearest even (f16 or bf16). */
export function adamwF(param: FArr, po: number, grad: FloatSource, m: FArr, mo: number, v: FArr, vo: number, p16: { a: Uint16Array; o: number; dtype: DType } | null, n: number, hp: AdamWParams): void {
  const { lr, beta1, beta2, eps, weightDecay, decoupled, step, gradScale } = hp;
  const bc1 = 1 - Math.pow(beta1, step);
  const bc2 = 1 - Math.pow(beta2, step);
  const g = decoder(grad);
  const enc = p16 === null ? null : p16.dtype === "f16" ? f16FromNumber : bf16FromNumber;
  for (let i = 0; i < n; i++) {
    let p = param[po + i]!;
    let gi = g(i) * gradScale;
    if (!decoupled) gi += weightDecay * p;
    const mi = beta1 * m[mo + i]! + (1 - beta1) * gi;
    const vi = beta2 * v[vo + i]! + (1 - beta2) * gi * gi;
    m[mo + i] = mi;
    v[vo + i] = vi;
    if (decoupled) p -= lr * weightDecay * p;
    p -= (lr * (mi / bc1)) / (Math.sqrt(vi / bc2) + eps);
    param[po + i] = p;
    if (enc !== null) p16!.a[p16!.o + i] = enc(param[po + i]!);
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
  if (p16 === null) return;
  const enc = p16.dtype === "f16" ? f16FromNumber : bf16FromNumber;
  for (let i = 0; i < n; i++) p16.a[p16.o + i] = enc(param[po + i]!);
}

/** Σ x[i]² over i < n in a float64 accumulator, ascending order. */
export function sumSquaresF(x: FloatSource, n: number): number {
  const g = decoder(x);
  let s = 0;
  if (x.dtype === "f32") {
    const a = x.a;
    for (let i = 0; i < n; i++) {
      const t = a[x.o + i]!;
      s += t * t;
    }
    return s;
  }
  for (let i = 0; i < n; i++) {
    const t = g(i);
    s += t * t;
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
  const g = decoder(grad);
  for (let i = 0; i < n; i++) {
    const gi = g(i) * gradScale;
    const mi = beta1 * m[mo + i]! + (1 - beta1) * gi;
    const vi = beta2 * v[vo + i]! + (1 - beta2) * gi * gi;
    m[mo + i] = mi;
    v[vo + i] = vi;
    const denom = epsInsideSqrt ? Math.sqrt(vi + eps) : Math.sqrt(vi) + eps;
    upd[uo + i] = mi / denom + weightDecay * param[po + i]!;
  }
}
