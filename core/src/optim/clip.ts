/**
 * Host-side gradient clipping by global L2 norm (PyTorch `clip_grad_norm_`, DeepSpeed
 * `gradient_clipping`): with the global norm ‖g‖ over all gradients of all ranks,
 * coefficient = min(1, max_norm / (‖g‖ + 1e-6)), and every gradient is multiplied by it.
 * The device computes per-shard sums of squares (`Backend.sumSquares`); ranks sum them (in a fixed
 * order) and call these functions with the total.
 */

/** PyTorch's ε in the clip coefficient's denominator. */
export const CLIP_EPS = 1e-6;

/** ‖g‖₂ from a total sum of squares (≥ 0; NaN/inf pass through). */
export function globalNormFromSumSquares(sumSquares: number): number {
  return Math.sqrt(sumSquares);
}

/**
 * Clip coefficient for `globalNorm` and `maxNorm` (the config's `gradient_clipping`).
 * Returns 1 when clipping is off (`maxNorm` ≤ 0) or the norm is within bounds; otherwise
 * maxNorm / (globalNorm + 1e-6) < 1. A non-finite norm gives NaN (inf → 0 would silently zero the
 * step): callers check overflow first (fp16) or treat NaN as a failed step.
 */
export function clipCoefficient(globalNorm: number, maxNorm: number): number {
  if (!(maxNorm > 0)) return 1;
  if (!Number.isFinite(globalNorm)) return NaN;
  return Math.min(1, maxNorm / (globalNorm + CLIP_EPS));
}

/** What one optimizer step multiplies its gradients by, and the numbers behind it. */
export interface GradScaleResult {
  /** Global L2 norm of the *unscaled* gradients. */
  norm: number;
  /** Clip coefficient applied (1 when not clipping). */
  clipCoef: number;
  /** Multiplier for AdamW's `gradScale`: clipCoef / lossScale. */
  gradScale: number;
}

/**
 * Combines loss-scale removal and clipping, as DeepSpeed's fp16 optimizers do
 * (`unscale_and_clip_grads`): the norm of the scaled gradients divided by `lossScale` is the true
 * norm; the gradients are multiplied by clipCoef(norm) / lossScale.
 * @param scaledSumSquares Σ g² over all ranks' gradients as stored (still multiplied by lossScale).
 * @param lossScale the loss scale used in backward (1 without fp16).
 * @param maxNorm `gradient_clipping` (0 = off).
 */
export function unscaleAndClip(scaledSumSquares: number, lossScale: number, maxNorm: number): GradScaleResult {
  if (!(lossScale > 0)) throw new RangeError(`unscaleAndClip: lossScale must be > 0, got ${lossScale}`);
  const norm = globalNormFromSumSquares(scaledSumSquares) / lossScale;
  const clipCoef = clipCoefficient(norm, maxNorm);
  return { norm, clipCoef, gradScale: clipCoef / lossScale };
}
