/**
 * LAMB's first phase (You et al. 2019 "Large Batch Optimization for Deep Learning: Training BERT
 * in 76 minutes", Alg. 2; DeepSpeed FusedLamb `lamb_cuda_kernel_part1`), elementwise:
 *   g = grad·gradScale;  m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
 *   update = m / (sqrt(v) + eps) + wd·p      (sqrt(v + eps) when eps_inside_sqrt)
 * The per-tensor norms of p and update (sumSquares) and the trust-ratio step (axpy) are separate
 * launches composed by core/src/optim/lamb-step.ts. Grads may be f32, f16 or bf16.
 */
import type { Buf, DType, LambParams } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { bindTypeOf, entry, EW_WG, f32s, groups, u32s, memoKernel } from "./launch.ts";
import { floatLoader } from "./prelude.ts";

/** Launch of one LAMB update phase over n elements (null when n is 0). */
export function lambUpdateLaunch(param: Buf, poff: number, grad: Buf, goff: number, m: Buf, moff: number, v: Buf, voff: number, upd: Buf, uoff: number, n: number, p: LambParams): Launch | null {
  if (n === 0) return null;
  const gd: DType = grad.dtype;
  const kernel: Kernel = memoKernel(`lamb_update_${gd}`, () => ({
    label: `lamb_update_${gd}`,
    buffers: [
      { name: "b_p", type: "f32", write: false },
      { name: "b_g", type: bindTypeOf(gd), write: false },
      { name: "b_m", type: "f32", write: true },
      { name: "b_v", type: "f32", write: true },
      { name: "b_u", type: "f32", write: true },
    ],
    params: [...u32s("poff", "goff", "moff", "voff", "uoff", "n", "inside"), ...f32s("b1", "b2", "eps", "wd", "gscale")],
    code: `${floatLoader("ld_g", "b_g", gd)}${entry(EW_WG)} {
  let j = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (j >= P.n) { return; }
  let g = ld_g(P.goff + j) * P.gscale;
  let mv = P.b1 * b_m[P.moff + j] + (1.0 - P.b1) * g;
  let vv = P.b2 * b_v[P.voff + j] + (1.0 - P.b2) * g * g;
  b_m[P.moff + j] = mv;
  b_v[P.voff + j] = vv;
  var denom = sqrt(vv) + P.eps;
  if (P.inside != 0u) { denom = sqrt(vv + P.eps); }
  b_u[P.uoff + j] = mv / denom + P.wd * b_p[P.poff + j];
}`,
  }));
  const values = [poff, goff, moff, voff, uoff, n, p.epsInsideSqrt ? 1 : 0, p.beta1, p.beta2, p.eps, p.weightDecay, p.gradScale];
  return { kernel, bufs: [param, grad, m, v, upd], params: values, workgroups: groups(n) };
}
