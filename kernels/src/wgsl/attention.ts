/**
 * Causal scaled-dot-product attention, forward and backward (f32), grouped-query heads
 * (head h reads kv head floor(h·Hkv/H)). Layouts: q, out, dout [B, S, H, D]; k, v [B, S, Hkv, D];
 * lse [B, H, S].
 *
 * Forward: one workgroup of 64 per (b, h, query row i), online softmax (Milakov & Gimelshein 2018;
 * FlashAttention, Dao et al. 2022) over blocks of 64 keys: invocation t scores key j0+t, then every
 * invocation rescales its share of the output accumulator (dims d ≡ t mod 64).
 * Backward, deterministic without float atomics, in three dispatches:
 *   1. Δ_i = Σ_d dout_i·out_i                                  (one invocation per row)
 *   2. dq_i = scale · Σ_j P_ij (dout_i·v_j − Δ_i) k_j            (workgroup per (b, h, i))
 *   3. dk_j = scale · Σ_{h in group} Σ_{i≥j} dS_ij q_i, dv_j = Σ Σ P_ij dout_i
 *                                                               (workgroup per (b, kv head, j))
 * with P_ij = exp(scale·q_i·k_j − lse_i), dS_ij = P_ij (dout_i·v_j − Δ_i); sums in fixed order.
 */
import type { Buf } from "../backend.ts";
import type { BufferDecl, Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, f32s, groups, u32s, memoKernel } from "./launch.ts";

const AW = 64;
const F = "f32" as const;

function consts(D: number): string {
  return `const DH: u32 = ${D}u;\nconst DPT: u32 = ${Math.ceil(D / AW)}u;\n`;
}

const DIMS = u32s("B", "S", "H", "Hkv", "qoff", "koff", "voff", "ooff", "loff");

/** WGSL index helpers of the layouts (q/dout rows, k/v rows, lse/Δ entries); need `DH` and
 * `P.S`, `P.H`, `P.Hkv`. Shared with attention-tiled.ts. */
export const ATTENTION_INDEX = `fn qidx(b: u32, i: u32, h: u32) -> u32 { return ((b * P.S + i) * P.H + h) * DH; }
fn kidx(b: u32, j: u32, kh: u32) -> u32 { return ((b * P.S + j) * P.Hkv + kh) * DH; }
fn ridx(b: u32, h: u32, i: u32) -> u32 { return (b * P.H + h) * P.S + i; }
`;

/** Buffer declarations of the forward kernels (q, k, v read; out, lse written). Shared with
 * attention-tiled.ts. */
export const ATTENTION_FWD_BUFFERS: readonly BufferDecl[] = [
  ...["b_q", "b_k", "b_v"].map((name) => ({ name, type: F, write: false })),
  ...["b_out", "b_lse"].map((name) => ({ name, type: F, write: true })),
];

/** Per-row kernels: workgroup → query row i of head h in batch b (and its kv head kh); workgroups
 * past the B·H·S rows return. */
const QUERY_ROW = `  let id = wg_lin(wg, nwg);
  if (id >= P.B * P.H * P.S) { return; }
  let i = id % P.S;
  let h = (id / P.S) % P.H;
  let b = id / (P.S * P.H);
  let kh = (h * P.Hkv) / P.H;`;

/** Buffer declarations of a backward kernel: the read-only inputs q, k, v, lse, dout, Δ, then the
 * written `outputs` (e.g. "b_dq"). Shared with attention-tiled.ts. */
export function attentionBackwardBuffers(...outputs: string[]): BufferDecl[] {
  const inputs = ["b_q", "b_k", "b_v", "b_lse", "b_do", "b_delta"].map((name) => ({ name, type: F, write: false }));
  return [...inputs, ...outputs.map((name) => ({ name, type: F, write: true }))];
}

/** Launch of the attention forward. */
export function attentionLaunch(q: Buf, qoff: number, k: Buf, koff: number, v: Buf, voff: number, out: Buf, ooff: number, lse: Buf, loff: number, B: number, S: number, H: number, Hkv: number, D: number, scale: number): Launch | null {
  if (B * S * H === 0 || D === 0) return null;
  const kernel: Kernel = memoKernel(`attention_fwd_d${D}`, () => ({
    label: `attention_fwd_d${D}`,
    buffers: ATTENTION_FWD_BUFFERS,
    params: [...DIMS, ...f32s("scale")],
    code: `${consts(D)}${ATTENTION_INDEX}
var<workgroup> qs: array<f32, DH>;
var<workgroup> sc: array<f32, ${AW}>;
${entry(AW)} {
${QUERY_ROW}
  let qb = P.qoff + qidx(b, i, h);
  for (var d = li; d < DH; d = d + ${AW}u) { qs[d] = b_q[qb + d] * P.scale; }
  workgroupBarrier();
  var m: f32 = -3.0e38;
  var l: f32 = 0.0;
  var acc: array<f32, DPT>;
  for (var r = 0u; r < DPT; r = r + 1u) { acc[r] = 0.0; }
  for (var j0 = 0u; j0 <= i; j0 = j0 + ${AW}u) {
    let j = j0 + li;
    var s: f32 = -3.0e38;
    if (j <= i) {
      let kb = P.koff + kidx(b, j, kh);
      var dot: f32 = 0.0;
      for (var d = 0u; d < DH; d = d + 1u) { dot = dot + qs[d] * b_k[kb + d]; }
      s = dot;
    }
    sc[li] = s;
    workgroupBarrier();
    var bm: f32 = m;
    for (var t = 0u; t < ${AW}u; t = t + 1u) { bm = max(bm, sc[t]); }
    let alpha = exp(m - bm);
    l = l * alpha;
    for (var r = 0u; r < DPT; r = r + 1u) { acc[r] = acc[r] * alpha; }
    for (var t = 0u; t < ${AW}u; t = t + 1u) {
      let jj = j0 + t;
      if (jj > i) { break; }
      let p = exp(sc[t] - bm);
      l = l + p;
      let vb = P.voff + kidx(b, jj, kh);
      for (var r = 0u; r < DPT; r = r + 1u) {
        let d = li + ${AW}u * r;
        if (d < DH) { acc[r] = acc[r] + p * b_v[vb + d]; }
      }
    }
    m = bm;
    workgroupBarrier();
  }
  let ob = P.ooff + qidx(b, i, h);
  for (var r = 0u; r < DPT; r = r + 1u) {
    let d = li + ${AW}u * r;
    if (d < DH) { b_out[ob + d] = acc[r] / l; }
  }
  if (li == 0u) { b_lse[P.loff + ridx(b, h, i)] = m + log(l); }
}`,
  }));
  return { kernel, bufs: [q, k, v, out, lse], params: [B, S, H, Hkv, qoff, koff, voff, ooff, loff, scale], workgroups: B * H * S };
}

/** Launch computing Δ[b, h, i] = Σ_d dout·out (rows of [B, S, H, D]) into `delta` from element 0:
 * the first step of every attention backward. */
export function attentionDeltaLaunch(out: Buf, ooff: number, dout: Buf, dooff: number, delta: Buf, B: number, S: number, H: number, D: number): Launch {
  const rows = B * H * S;
  const pre: Kernel = memoKernel(`attention_bwd_delta_d${D}`, () => ({
    label: `attention_bwd_delta_d${D}`,
    buffers: [
      { name: "b_out", type: F, write: false },
      { name: "b_do", type: F, write: false },
      { name: "b_delta", type: F, write: true },
    ],
    params: u32s("B", "S", "H", "ooff", "dooff"),
    code: `${consts(D)}${entry(EW_WG)} {
  let id = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (id >= P.B * P.H * P.S) { return; }
  let i = id % P.S;
  let h = (id / P.S) % P.H;
  let b = id / (P.S * P.H);
  let base = ((b * P.S + i) * P.H + h) * DH;
  var s: f32 = 0.0;
  for (var d = 0u; d < DH; d = d + 1u) { s = s + b_out[P.ooff + base + d] * b_do[P.dooff + base + d]; }
  b_delta[id] = s;
}`,
  }));
  return { kernel: pre, bufs: [out, dout, delta], params: [B, S, H, ooff, dooff], workgroups: groups(rows) };
}

/** Launches of the attention backward; `delta` is a scratch f32 buffer of ≥ B·H·S elements
 * (from element 0). dq, dk, dv are overwritten. */
export function attentionBackwardLaunches(
  q: Buf, qoff: number, k: Buf, koff: number, v: Buf, voff: number, out: Buf, ooff: number, lse: Buf, loff: number,
  dout: Buf, dooff: number, dq: Buf, dqoff: number, dk: Buf, dkoff: number, dv: Buf, dvoff: number, delta: Buf,
  B: number, S: number, H: number, Hkv: number, D: number, scale: number,
): Launch[] {
  if (B * S === 0 || D === 0) return [];
  const rows = B * H * S;
  const common = `${consts(D)}${ATTENTION_INDEX}`;
  const dqK: Kernel = memoKernel(`attention_bwd_dq_d${D}`, () => ({
    label: `attention_bwd_dq_d${D}`,
    buffers: attentionBackwardBuffers("b_dq"),
    params: [...u32s("B", "S", "H", "Hkv", "qoff", "koff", "voff", "loff", "dooff", "dqoff"), ...f32s("scale")],
    code: `${common}
var<workgroup> qs: array<f32, DH>;
var<workgroup> dos: array<f32, DH>;
var<workgroup> dss: array<f32, ${AW}>;
${entry(AW)} {
${QUERY_ROW}
  let qb = qidx(b, i, h);
  for (var d = li; d < DH; d = d + ${AW}u) { qs[d] = b_q[P.qoff + qb + d]; dos[d] = b_do[P.dooff + qb + d]; }
  workgroupBarrier();
  let L = b_lse[P.loff + ridx(b, h, i)];
  let Di = b_delta[ridx(b, h, i)];
  var acc: array<f32, DPT>;
  for (var r = 0u; r < DPT; r = r + 1u) { acc[r] = 0.0; }
  for (var j0 = 0u; j0 <= i; j0 = j0 + ${AW}u) {
    let j = j0 + li;
    var ds: f32 = 0.0;
    if (j <= i) {
      let kb = kidx(b, j, kh);
      var s: f32 = 0.0;
      var dp: f32 = 0.0;
      for (var d = 0u; d < DH; d = d + 1u) { s = s + qs[d] * b_k[P.koff + kb + d]; dp = dp + dos[d] * b_v[P.voff + kb + d]; }
      let p = exp(s * P.scale - L);
      ds = p * (dp - Di);
    }
    dss[li] = ds;
    workgroupBarrier();
    for (var t = 0u; t < ${AW}u; t = t + 1u) {
      let jj = j0 + t;
      if (jj > i) { break; }
      let kb = kidx(b, jj, kh);
      for (var r = 0u; r < DPT; r = r + 1u) {
        let d = li + ${AW}u * r;
        if (d < DH) { acc[r] = acc[r] + dss[t] * b_k[P.koff + kb + d]; }
      }
    }
    workgroupBarrier();
  }
  for (var r = 0u; r < DPT; r = r + 1u) {
    let d = li + ${AW}u * r;
    if (d < DH) { b_dq[P.dqoff + qb + d] = acc[r] * P.scale; }
  }
}`,
  }));
  const dkvK: Kernel = memoKernel(`attention_bwd_dkv_d${D}`, () => ({
    label: `attention_bwd_dkv_d${D}`,
    buffers: attentionBackwardBuffers("b_dk", "b_dv"),
    params: [...u32s("B", "S", "H", "Hkv", "qoff", "koff", "voff", "loff", "dooff", "dkoff", "dvoff"), ...f32s("scale")],
    code: `${common}
var<workgroup> ks: array<f32, DH>;
var<workgroup> vs: array<f32, DH>;
var<workgroup> ps: array<f32, ${AW}>;
var<workgroup> dss: array<f32, ${AW}>;
${entry(AW)} {
  let id = wg_lin(wg, nwg);
  if (id >= P.B * P.Hkv * P.S) { return; }
  let j = id % P.S;
  let kh = (id / P.S) % P.Hkv;
  let b = id / (P.S * P.Hkv);
  let kb = kidx(b, j, kh);
  for (var d = li; d < DH; d = d + ${AW}u) { ks[d] = b_k[P.koff + kb + d]; vs[d] = b_v[P.voff + kb + d]; }
  workgroupBarrier();
  var adk: array<f32, DPT>;
  var adv: array<f32, DPT>;
  for (var r = 0u; r < DPT; r = r + 1u) { adk[r] = 0.0; adv[r] = 0.0; }
  for (var h = 0u; h < P.H; h = h + 1u) {
    if ((h * P.Hkv) / P.H != kh) { continue; }
    for (var i0 = j; i0 < P.S; i0 = i0 + ${AW}u) {
      let i = i0 + li;
      var p: f32 = 0.0;
      var ds: f32 = 0.0;
      if (i < P.S) {
        let qb = qidx(b, i, h);
        var s: f32 = 0.0;
        var dp: f32 = 0.0;
        for (var d = 0u; d < DH; d = d + 1u) { s = s + b_q[P.qoff + qb + d] * ks[d]; dp = dp + b_do[P.dooff + qb + d] * vs[d]; }
        p = exp(s * P.scale - b_lse[P.loff + ridx(b, h, i)]);
        ds = p * (dp - b_delta[ridx(b, h, i)]);
      }
      ps[li] = p;
      dss[li] = ds;
      workgroupBarrier();
      for (var t = 0u; t < ${AW}u; t = t + 1u) {
        let ii = i0 + t;
        if (ii >= P.S) { break; }
        let qb = qidx(b, ii, h);
        for (var r = 0u; r < DPT; r = r + 1u) {
          let d = li + ${AW}u * r;
          if (d < DH) {
            adv[r] = adv[r] + ps[t] * b_do[P.dooff + qb + d];
            adk[r] = adk[r] + dss[t] * b_q[P.qoff + qb + d];
          }
        }
      }
      workgroupBarrier();
    }
  }
  for (var r = 0u; r < DPT; r = r + 1u) {
    let d = li + ${AW}u * r;
    if (d < DH) { b_dk[P.dkoff + kb + d] = adk[r] * P.scale; b_dv[P.dvoff + kb + d] = adv[r]; }
  }
}`,
  }));
  return [
    attentionDeltaLaunch(out, ooff, dout, dooff, delta, B, S, H, D),
    { kernel: dqK, bufs: [q, k, v, lse, dout, delta, dq], params: [B, S, H, Hkv, qoff, koff, voff, loff, dooff, dqoff, scale], workgroups: rows },
    { kernel: dkvK, bufs: [q, k, v, lse, dout, delta, dk, dv], params: [B, S, H, Hkv, qoff, koff, voff, loff, dooff, dkoff, dvoff, scale], workgroups: B * Hkv * S },
  ];
}
