/**
 * Fused Adam/AdamW step (Kingma & Ba 2015; Loshchilov & Hutter 2019), in the form of PyTorch's
 * `torch.optim.AdamW` single-tensor path:
 *   g = grad·gradScale (+ wd·p when not decoupled)
 *   m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
 *   p = p·(1 − lr·wd) when decoupled
 *   p = p − (lr / (1−β1^t)) · m / (sqrt(v)/sqrt(1−β2^t) + eps)
 * Bias corrections are computed on the host in float64. Grads may be f32, f16 or bf16. With a
 * 16-bit `param16` copy, invocations own one param16 word (two elements) so no two invocations
 * write the same word (the word writer of fill-copy-cast.ts).
 *
 * With a device scale (`scale`, the [scale, skip] pair Backend.clipScale writes) gradients are
 * multiplied by gradScale·scale, and when skip ≠ 0 nothing changes: p, m and v keep their values
 * (a 16-bit copy is rewritten from the unchanged master, which it already equals).
 */
import type { AdamWParams, Buf, DType } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { bindTypeOf, entry, EW_WG, f32s, groups, u32s, memoKernel } from "./launch.ts";
import { floatLoader, toHalfBits } from "./prelude.ts";
import { wordsTouched, wordWriter } from "./fill-copy-cast.ts";

/** Launch of one AdamW step over n elements. */
export function adamwLaunch(param: Buf, poff: number, grad: Buf, goff: number, m: Buf, moff: number, v: Buf, voff: number, param16: Buf | null, p16off: number, n: number, p: AdamWParams, scale: { buf: Buf; off: number } | null = null): Launch | null {
  if (n === 0) return null;
  const gd: DType = grad.dtype;
  const dev = scale !== null;
  const tag = dev ? "_devscale" : "";
  const step = `fn step(j: u32) -> f32 {
${dev ? "  if (b_s[P.soff + 1u] != 0.0) { return b_p[P.poff + j]; }\n  var g = ld_g(P.goff + j) * (P.gscale * b_s[P.soff]);" : "  var g = ld_g(P.goff + j) * P.gscale;"}
  var pv = b_p[P.poff + j];
  if (P.decoupled == 0u) { g = g + P.wd * pv; }
  let mv = P.b1 * b_m[P.moff + j] + (1.0 - P.b1) * g;
  let vv = P.b2 * b_v[P.voff + j] + (1.0 - P.b2) * g * g;
  b_m[P.moff + j] = mv;
  b_v[P.voff + j] = vv;
  if (P.decoupled != 0u) { pv = pv * (1.0 - P.lr * P.wd); }
  pv = pv - P.stepsize * mv / (sqrt(vv) / P.bc2sqrt + P.eps);
  b_p[P.poff + j] = pv;
  return pv;
}
`;
  const buffers = [
    { name: "b_p", type: "f32" as const, write: true },
    { name: "b_g", type: bindTypeOf(gd), write: false },
    { name: "b_m", type: "f32" as const, write: true },
    { name: "b_v", type: "f32" as const, write: true },
    ...(dev ? [{ name: "b_s", type: "f32" as const, write: false }] : []),
  ];
  const params = [...u32s("poff", "goff", "moff", "voff", "doff", "n", "decoupled"), ...f32s("lr", "b1", "b2", "eps", "wd", "gscale", "stepsize", "bc2sqrt"), ...(dev ? u32s("soff") : [])];
  const bc1 = 1 - Math.pow(p.beta1, p.step);
  const bc2 = 1 - Math.pow(p.beta2, p.step);
  const values = [poff, goff, moff, voff, p16off, n, p.decoupled ? 1 : 0, p.lr, p.beta1, p.beta2, p.eps, p.weightDecay, p.gradScale, p.lr / bc1, Math.sqrt(bc2), ...(dev ? [scale.off] : [])];
  const sbufs = dev ? [scale.buf] : [];
  const loader = floatLoader("ld_g", "b_g", gd);
  if (param16) {
    const kernel: Kernel = memoKernel(`adamw_${gd}_to_${param16.dtype}${tag}`, () => ({
      label: `adamw_${gd}_to_${param16.dtype}${tag}`,
      buffers: [...buffers, { name: "b_dst", type: "w16", write: true }],
      params,
      // the step's value of relative element j, stored as 16 bits through the shared word writer
      code: `${loader}${step}fn val16(j: u32) -> u32 { return ${toHalfBits(param16.dtype, "step(j)")}; }\n${wordWriter()}`,
    }));
    return { kernel, bufs: [param, grad, m, v, ...sbufs, param16], params: values, workgroups: groups(wordsTouched(p16off, n)) };
  }
  const kernel: Kernel = memoKernel(`adamw_${gd}${tag}`, () => ({
    label: `adamw_${gd}${tag}`,
    buffers,
    params,
    code: `${loader}${step}${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  step(i);
}`,
  }));
  return { kernel, bufs: [param, grad, m, v, ...sbufs], params: values, workgroups: groups(n) };
}
