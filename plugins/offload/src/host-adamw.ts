/**
 * AdamW on host memory over elements [lo, hi) of one unit's optimizer range — the kernel the host
 * optimizer (ZeRO-Offload's "CPU Adam", Ren et al., USENIX ATC'21 §4.1) runs on each worker thread.
 *
 * The arithmetic is the cpu backend's fused `adamw` (kernels/src/cpu/optim.ts `adamwF`, PyTorch
 * `torch.optim.AdamW` order) operation for operation: f32 operands widened to f64, m and v rounded to
 * f32 when stored while the update uses the unrounded f64 values, the new parameter rounded to f32
 * and then (mixed precision) to 16 bits nearest-even. So an offloaded step on the cpu backend is
 * bit-identical to the device step, and splitting [0, n) over threads changes nothing (elementwise).
 */
import { bf16FromNumber, bf16ToNumber, f16FromNumber, f16ToNumber, type AdamWParams } from "@zeromoe/kernels";

/** Storage dtype of gradients / parameters on the device. */
export type GradDtype = "f32" | "bf16" | "f16";

/**
 * One AdamW step in place over [lo, hi).
 * @param master fp32 master parameters (length ≥ hi)
 * @param grad the summed gradient: f32 values, or 16-bit bits (`gradDtype` bf16/f16), length ≥ hi
 * @param m,v fp32 moments
 * @param p16 when non-null, receives the new parameters as 16-bit bits of `p16Dtype`
 * @param hp hyper-parameters, gradScale included (kernels' AdamWParams)
 */
export function adamwHost(
  master: Float32Array, grad: Float32Array | Uint16Array, gradDtype: GradDtype, m: Float32Array, v: Float32Array,
  p16: Uint16Array | null, p16Dtype: "bf16" | "f16", lo: number, hi: number, hp: AdamWParams,
): void {
  const { lr, beta1, beta2, eps, weightDecay, decoupled, step, gradScale } = hp;
  const bc1 = 1 - Math.pow(beta1, step);
  const bc2 = 1 - Math.pow(beta2, step);
  const dec = gradDtype === "f16" ? f16ToNumber : gradDtype === "bf16" ? bf16ToNumber : null;
  const enc = p16Dtype === "f16" ? f16FromNumber : bf16FromNumber;
  for (let i = lo; i < hi; i++) {
    let p = master[i]!;
    let gi = (dec === null ? grad[i]! : dec(grad[i]!)) * gradScale;
    if (!decoupled) gi += weightDecay * p;
    const mi = beta1 * m[i]! + (1 - beta1) * gi;
    const vi = beta2 * v[i]! + (1 - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    if (decoupled) p -= lr * weightDecay * p;
    p -= (lr * (mi / bc1)) / (Math.sqrt(vi / bc2) + eps);
    master[i] = p;
    if (p16 !== null) p16[i] = enc(master[i]!);
  }
}
