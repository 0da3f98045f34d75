/**
 * Rotary position embedding, Hugging Face "rotate_half" layout (Llama; Su et al. 2021 RoFormer):
 * for x [batch, seq, heads, D], pairs (i, i + D/2), angle = pos · theta^(−2i/D), pos = seq index:
 *   y_i = x_i cos − x_{i+D/2} sin;  y_{i+D/2} = x_{i+D/2} cos + x_i sin
 * (`inverse` uses −sin: the transpose rotation, i.e. the backward). One invocation per pair.
 * The inverse frequencies come from a host-computed table (float64 θ^(−2i/D) rounded to f32, see
 * {@link ropeInvFreq}; WGSL's exp2 may be off by 3 + 2|x| ulp), the angle pos·f is formed in f32
 * as in Hugging Face, then range-reduced to [−π, π] (Cody–Waite, two-constant 2π) before sin/cos,
 * since Vulkan only bounds their error on that interval.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, f32s, groups, u32s, memoKernel } from "./launch.ts";

/** Inverse frequencies θ^(−2i/D) for i < D/2, computed in float64, as an f32 table. */
export function ropeInvFreq(headDim: number, theta: number): Float32Array {
  const half = headDim / 2;
  const t = new Float32Array(half);
  for (let i = 0; i < half; i++) t[i] = Math.pow(theta, (-2 * i) / headDim);
  return t;
}

/** Launch of rope; `invFreq` holds {@link ropeInvFreq}(headDim, theta) from element 0. Throws if
 * headDim is odd. A block of the (batch, seq) positions — `positions` of them from flattened
 * position `pos0` (a split across buffer segments, webgpu/segments.ts) — takes its sequence index
 * as (pos0 + p) mod seq; the defaults are the whole tensor. */
export function ropeLaunch(invFreq: Buf, x: Buf, xoff: number, y: Buf, yoff: number, batch: number, seq: number, heads: number, headDim: number, inverse: boolean, pos0 = 0, positions = batch * seq): Launch | null {
  if (headDim % 2 !== 0) throw new Error(`webgpu rope: headDim must be even, got ${headDim}`);
  const half = headDim / 2;
  const total = positions * heads * half;
  if (total === 0) return null;
  const kernel: Kernel = memoKernel("rope", () => ({
    label: "rope",
    buffers: [
      { name: "b_f", type: "f32", write: false },
      { name: "b_x", type: "f32", write: false },
      { name: "b_y", type: "f32", write: true },
    ],
    params: [...u32s("xoff", "yoff", "seq", "heads", "D", "half", "total", "pos0"), ...f32s("sgn")],
    code: `${entry(EW_WG)} {
  let t = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (t >= P.total) { return; }
  let i = t % P.half;
  let row = t / P.half;          // (b, s, h) flattened
  let pos = (row / P.heads + P.pos0 % P.seq) % P.seq;
  let a = f32(pos) * b_f[i];
  let k = round(a * 0.15915494309189535);
  let rr = (a - k * 6.28125) - k * 0.0019353071795864769;
  let c = cos(rr);
  let s = sin(rr) * P.sgn;
  let base = row * P.D;
  let x1 = b_x[P.xoff + base + i];
  let x2 = b_x[P.xoff + base + i + P.half];
  b_y[P.yoff + base + i] = x1 * c - x2 * s;
  b_y[P.yoff + base + i + P.half] = x2 * c + x1 * s;
}`,
  }));
  return { kernel, bufs: [invFreq, x, y], params: [xoff, yoff, seq, heads, headDim, half, total, pos0, inverse ? -1 : 1], workgroups: groups(total) };
}
