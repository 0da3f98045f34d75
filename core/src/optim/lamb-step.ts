/**
 * LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76
 * minutes", Alg. 2) in the form of DeepSpeed's FusedLamb (deepspeed/ops/lamb/fused_lamb.py and
 * csrc/lamb/fused_lamb_cuda_kernel.cu), on the shards of a unit's flat buffer.
 *
 * Per parameter tensor (a segment `[offset, offset + numel)` of its unit's flat buffer):
 *   m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²;  u = m/(√v + eps) + wd·p      (backend lambUpdate)
 *   r = ‖p‖/‖u‖ clamped to [min_coeff, max_coeff]; r = 1 when either norm is 0
 *   p ← p − step_size·r·u,  step_size = lr·√(1−β2^t)/(1−β1^t) with bias_correction, else lr
 * Under ZeRO 1–3 a rank owns a range of the flat buffer that can cut through tensors: each rank
 * computes Σp² and Σu² of its piece of every tensor on the device (sumSquares), the pieces' sums
 * (2 floats per tensor) are summed over the unit's group with one small f64 all_reduce, and the
 * step is applied on the device (axpy). No shard leaves the device.
 */
import type { Backend, Buf, LambParams, View } from "@zeromoe/kernels";

/** A tensor's piece inside a rank's owned range: `tensor` index in the unit, `start` relative to
 * the owned range's first element, `count` elements. */
export interface LambPiece {
  tensor: number;
  start: number;
  count: number;
}

/** Pieces of the tensors `segments` (offset, numel in unit coordinates, ascending, contiguous)
 * inside the owned range `[optimStart, optimStart + optimCount)`, in tensor order. Tensors that
 * do not intersect the range are left out. */
export function lambPieces(segments: readonly { offset: number; numel: number }[], optimStart: number, optimCount: number): LambPiece[] {
  const out: LambPiece[] = [];
  const end = optimStart + optimCount;
  segments.forEach((s, tensor) => {
    const a = Math.max(s.offset, optimStart);
    const b = Math.min(s.offset + s.numel, end);
    if (b > a) out.push({ tensor, start: a - optimStart, count: b - a });
  });
  return out;
}

/** LAMB's trust ratio from the squared norms of a tensor's weights and update: √w2/√u2 clamped to
 * [minCoeff, maxCoeff], or 1 when either norm is 0 (DeepSpeed `lamb_cuda_kernel_part3`). */
export function trustRatio(w2: number, u2: number, minCoeff: number, maxCoeff: number): number {
  const w = Math.sqrt(w2);
  const u = Math.sqrt(u2);
  if (w === 0 || u === 0) return 1;
  return Math.min(maxCoeff, Math.max(minCoeff, w / u));
}

/** LAMB's step size: lr·√(1−β2^t)/(1−β1^t) with bias correction, else lr (t 1-based). */
export function lambStepSize(lr: number, beta1: number, beta2: number, step: number, biasCorrection: boolean): number {
  if (!biasCorrection) return lr;
  return (lr * Math.sqrt(1 - Math.pow(beta2, step))) / (1 - Math.pow(beta1, step));
}

/** One unit's owned range on the device: f32 master (or f32 params), its gradient (f32 or 16-bit),
 * moments m and v (f32), all of `n` elements starting at their views. */
export interface LambRange {
  master: View;
  grad: View;
  m: View;
  v: View;
  n: number;
  pieces: readonly LambPiece[];
}

/** Phase 1 of a range: moments updated in place, the update written to a new f32 buffer
 * (returned; the caller frees it after {@link lambApply}), and Σp², Σu² of each piece written to
 * `sums` (f32) at `[2k, 2k+1]` for piece k. */
export function lambPartials(be: Backend, r: LambRange, hp: LambParams, sums: View): Buf | null {
  if (r.n === 0) return null;
  const upd = be.alloc("f32", r.n, "other");
  be.lambUpdate(r.master, r.grad, r.m, r.v, { buf: upd, off: 0 }, r.n, hp);
  r.pieces.forEach((pc, k) => {
    be.sumSquares({ buf: r.master.buf, off: r.master.off + pc.start }, { buf: sums.buf, off: sums.off + 2 * k }, pc.count);
    be.sumSquares({ buf: upd, off: pc.start }, { buf: sums.buf, off: sums.off + 2 * k + 1 }, pc.count);
  });
  return upd;
}

/** Phase 2 of a range: p ← p − stepSize·ratio[tensor]·u on every piece (axpy on the device). */
export function lambApply(be: Backend, r: LambRange, upd: Buf, ratios: ArrayLike<number>, stepSize: number): void {
  for (const pc of r.pieces) {
    be.axpy(-stepSize * ratios[pc.tensor]!, { buf: upd, off: pc.start }, { buf: r.master.buf, off: r.master.off + pc.start }, pc.count);
  }
}
