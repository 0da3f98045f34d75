/**
 * The optimizer's gradient scale computed on the device (Backend.clipScale), so AdamW can read it
 * from a buffer and the host never waits for the gradient norm mid-step.
 *
 * One workgroup sums `count` partial sums of squares (invocation t adds partials t, t+256, … in
 * order, then a fixed tree: deterministic), then, as PyTorch's `clip_grad_norm_` and DeepSpeed's
 * `unscale_and_clip_grads` (core/src/optim/clip.ts does the same on the host in float64):
 *   norm  = √Σ / lsdiv                                  (lsdiv = loss scale × accumulation × world)
 *   coef  = maxNorm > 0 ? min(1, maxNorm / (norm + 1e-6)) : 1
 *   out   = [coef / lsdiv, skip, Σ]                      skip = 1 when Σ is inf or NaN (else 0)
 * The inf/NaN test reads the exponent bits (an optimising compiler may fold float comparisons).
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, f32s, memoKernel, u32s } from "./launch.ts";
import { treeReduce } from "./workgroup-reduce.ts";

/** PyTorch's ε in the clip coefficient's denominator (core/src/optim/clip.ts CLIP_EPS). */
const CLIP_EPS = "1e-6";

/** Launch writing [scale, skip, Σ] at out[ooff…ooff+2] from `count` f32 partials at part[poff…]. */
export function clipScaleLaunch(part: Buf, poff: number, count: number, out: Buf, ooff: number, lsDiv: number, maxNorm: number): Launch {
  const kernel: Kernel = memoKernel("clip_scale", () => ({
    label: "clip_scale",
    buffers: [
      { name: "b_part", type: "f32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: [...u32s("poff", "count", "ooff"), ...f32s("lsdiv", "maxnorm")],
    code: `${treeReduce(EW_WG)}${entry(EW_WG)} {
  var s: f32 = 0.0;
  for (var e = li; e < P.count; e = e + ${EW_WG}u) { s = s + b_part[P.poff + e]; }
  s = wg_sum(li, s);
  if (li != 0u) { return; }
  let bad = (bitcast<u32>(s) & 0x7f800000u) == 0x7f800000u;
  var scale: f32 = 0.0;
  if (!bad) {
    let norm = sqrt(s) / P.lsdiv;
    var coef: f32 = 1.0;
    if (P.maxnorm > 0.0) { coef = min(1.0, P.maxnorm / (norm + ${CLIP_EPS})); }
    scale = coef / P.lsdiv;
  }
  b_out[P.ooff] = scale;
  b_out[P.ooff + 1u] = select(0.0, 1.0, bad);
  b_out[P.ooff + 2u] = s;
}`,
  }));
  return { kernel, bufs: [part, out], params: [poff, count, ooff, lsDiv, maxNorm], workgroups: [1, 1, 1] };
}
