/**
 * SwiGLU's activation in one kernel per direction (Shazeer 2020, "GLU Variants Improve
 * Transformer"; vLLM's `silu_and_mul`): out = silu(gate) ⊙ up, one invocation per element, instead of
 * a `unary_silu` dispatch, a `binary_mul` dispatch and the silu output in memory.
 *
 * Backward, from the forward inputs: dUp = dy·silu(gate) and dGate = (dy·up)·σ(g)·(1 + g·(1 − σ(g))),
 * both written by one kernel (the unfused backward takes two `binary_mul` dispatches and a
 * `unary_bwd_silu`). σ is the overflow-safe form of unary.ts.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, memoKernel, u32s } from "./launch.ts";

// the same σ as unary.ts's SiLU
const SIGMOID = /* wgsl */ `
fn sigmoid_s(x: f32) -> f32 { if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); } let e = exp(x); return e / (1.0 + e); }
`;

/** Launch out[i] = silu(gate[i])·up[i] for i < n (element offsets per buffer). */
export function siluMulLaunch(gate: Buf, goff: number, up: Buf, uoff: number, out: Buf, ooff: number, n: number): Launch {
  const kernel: Kernel = memoKernel("silu_mul", () => ({
    label: "silu_mul",
    buffers: [
      { name: "b_g", type: "f32", write: false },
      { name: "b_u", type: "f32", write: false },
      { name: "b_o", type: "f32", write: true },
    ],
    params: u32s("goff", "uoff", "ooff", "n"),
    code: `${SIGMOID}${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  let g = b_g[P.goff + i];
  let s = g * sigmoid_s(g);
  b_o[P.ooff + i] = s * b_u[P.uoff + i];
}`,
  }));
  return { kernel, bufs: [gate, up, out], params: [goff, uoff, ooff, n], workgroups: groups(n) };
}

/** Launch dGate[i] = (dy[i]·up[i])·silu'(gate[i]) and dUp[i] = dy[i]·silu(gate[i]) for i < n
 * (both overwritten; dGate and dUp must not overlap). */
export function siluMulBackwardLaunch(gate: Buf, goff: number, up: Buf, uoff: number, dy: Buf, dyoff: number, dGate: Buf, dgoff: number, dUp: Buf, duoff: number, n: number): Launch {
  const kernel: Kernel = memoKernel("silu_mul_bwd", () => ({
    label: "silu_mul_bwd",
    buffers: [
      { name: "b_g", type: "f32", write: false },
      { name: "b_u", type: "f32", write: false },
      { name: "b_dy", type: "f32", write: false },
      { name: "b_dg", type: "f32", write: true },
      { name: "b_du", type: "f32", write: true },
    ],
    params: u32s("goff", "uoff", "dyoff", "dgoff", "duoff", "n"),
    code: `${SIGMOID}${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  let g = b_g[P.goff + i];
  let dy = b_dy[P.dyoff + i];
  let s = sigmoid_s(g);
  b_du[P.duoff + i] = dy * (g * s);
  let ds = dy * b_u[P.uoff + i];
  b_dg[P.dgoff + i] = ds * s * (1.0 + g * (1.0 - s));
}`,
  }));
  return { kernel, bufs: [gate, up, dy, dGate, dUp], params: [goff, uoff, dyoff, dgoff, duoff, n], workgroups: groups(n) };
}
