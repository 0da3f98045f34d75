/**
 * Tiled causal attention, forward and backward (f32), in the manner of FlashAttention-2 (Dao 2023):
 * a workgroup owns a block of B query rows (forward, dQ) or B key rows (dK/dV), stages Q/K/V/dO
 * tiles of B rows × D in workgroup memory and walks the other axis in blocks of B, so every K/V
 * (or Q/dO) element read from memory serves B rows instead of one. Same layouts, grouped-query
 * mapping, lse and results as attention.ts (the one-row-per-workgroup kernels, which stay as the
 * fallback when no block size fits the device's workgroup memory).
 *
 * Forward, per key block: S = (scale·Q)Kᵀ masked causally; per row, online softmax (running max m,
 * sum l, rescale α = exp(m_old − m_new)); O = α·O + P·V. Output O/l, lse = m + log l.
 * Backward (Δ_i = dO_i·O_i first, by attention.ts's delta kernel):
 *   dQ block:  dS = P ⊙ (dO·Vᵀ − Δ), P = exp(scale·QKᵀ − lse);  dQ = scale · dS·K
 *   dK/dV block, over the query heads of its kv group and the query blocks at or after it:
 *              dV += Pᵀ·dO;  dK += scale · dSᵀ·Q
 * Each sum runs in a fixed order (blocks ascending, rows/keys ascending within a block): results are
 * bit-reproducible. Invocations own fixed (row, d) output elements; row statistics are updated by
 * one invocation per row.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, f32s, memoKernel, u32s } from "./launch.ts";
import { ATTENTION_FWD_BUFFERS, ATTENTION_INDEX, attentionBackwardBuffers, attentionDeltaLaunch } from "./attention.ts";

/** Invocations per workgroup of the tiled kernels. */
const TW = 128;
const F = "f32" as const;
const NEG = "-3.0e38";

/** Workgroup-memory bytes of each tiled kernel for block size `b` and head dim `d`. */
export function attentionTileBytes(b: number, d: number): { fwd: number; dq: number; dkv: number } {
  const padded = b * (d + 1) * 4; // K and V tiles (and Q in the forward)
  return {
    fwd: 3 * padded + b * b * 4 + 8 * b * 4,
    dq: 4 * padded + b * b * 4,
    dkv: 4 * padded + 2 * b * b * 4,
  };
}

/** Largest block size in {32, 16} whose kernels fit in `maxShared` bytes for head dim `d`
 * (forward and backward separately), or 0 when none does. */
export function chooseAttentionBlock(d: number, maxShared: number): { fwd: number; bwd: number } {
  let fwd = 0;
  let bwd = 0;
  for (const b of [32, 16]) {
    const t = attentionTileBytes(b, d);
    if (!fwd && t.fwd <= maxShared) fwd = b;
    if (!bwd && Math.max(t.dq, t.dkv) <= maxShared) bwd = b;
  }
  return { fwd, bwd };
}

function header(D: number, B: number): string {
  return `const DH: u32 = ${D}u;
const KS: u32 = ${D + 1}u; // K/V tile row stride, padded so invocations reading different rows hit different banks
const BB: u32 = ${B}u;
const OPT: u32 = ${Math.ceil((B * D) / TW)}u;
${ATTENTION_INDEX}`;
}

/** Stages the K and V rows k0 … k0+BB−1 of kv head kh into the padded tiles Ks, Vs (zeros past S). */
const LOAD_KV = `
    for (var e = li; e < BB * DH; e = e + ${TW}u) {
      let kj = k0 + e / DH;
      var kv: f32 = 0.0;
      var vv: f32 = 0.0;
      if (kj < P.S) { let o = kidx(b, kj, kh) + e % DH; kv = b_k[P.koff + o]; vv = b_v[P.voff + o]; }
      Ks[(e / DH) * KS + e % DH] = kv;
      Vs[(e / DH) * KS + e % DH] = vv;
    }`;

/** acc[i·DPT + t] += Σ_j coef[row rg·RPT + i, j] · tile[j, d = cg + 8t] over the BB columns j of the
 * BB×BB workgroup array `coef` and the padded tile `tile` (O += P·V in the forward, dQ += dS·K). */
function accumulateRowsTimesTile(coef: string, tile: string): string {
  return `
    for (var j = 0u; j < BB; j = j + 1u) {
      var cv: array<f32, RPT>;
      for (var i = 0u; i < RPT; i = i + 1u) { cv[i] = ${coef}[(rg * RPT + i) * BB + j]; }
      for (var t = 0u; t < DPT; t = t + 1u) {
        let d = cg + 8u * t;
        if (d < DH) {
          let tv = ${tile}[j * KS + d];
          for (var i = 0u; i < RPT; i = i + 1u) { acc[i * DPT + t] = acc[i * DPT + t] + cv[i] * tv; }
        }
      }
    }`;
}

/** Launch of the tiled forward with block size `B` ∈ {16, 32} (from {@link chooseAttentionBlock}).
 *
 * Register blocking: the 128 invocations form 16 row groups × 8 column groups. For the score tile
 * an invocation holds B/16 rows × B/8 key columns (keys cg, cg+8, …) in registers, so each value
 * staged in workgroup memory feeds several multiply-adds; the row max and sum of the online softmax
 * are combined over the 8 invocations of a row group through workgroup memory (every one of them
 * computes the same values, in the same order); for P·V an invocation holds B/16 rows × ⌈D/8⌉
 * head dims (d = cg, cg+8, …). All tiles have padded rows (stride D+1). */
export function attentionTiledLaunch(q: Buf, qoff: number, k: Buf, koff: number, v: Buf, voff: number, out: Buf, ooff: number, lse: Buf, loff: number, Bt: number, S: number, H: number, Hkv: number, D: number, scale: number, B: number): Launch | null {
  if (Bt * S * H === 0 || D === 0) return null;
  if (B !== 16 && B !== 32) throw new Error(`attentionTiledLaunch: block size must be 16 or 32, got ${B}`);
  const nqb = Math.ceil(S / B);
  const RPT = B / 16;
  const CPT = B / 8;
  const DPT = Math.ceil(D / 8);
  const label = `attention_tiled_fwd_d${D}_b${B}`;
  const kernel: Kernel = memoKernel(label, () => ({
    label,
    buffers: ATTENTION_FWD_BUFFERS,
    params: [...u32s("B", "S", "H", "Hkv", "qoff", "koff", "voff", "ooff", "loff", "nqb"), ...f32s("scale")],
    code: `${header(D, B)}
const RPT: u32 = ${RPT}u;
const CPT: u32 = ${CPT}u;
const DPT: u32 = ${DPT}u;
var<workgroup> Qs: array<f32, ${B * (D + 1)}>;
var<workgroup> Ks: array<f32, ${B * (D + 1)}>;
var<workgroup> Vs: array<f32, ${B * (D + 1)}>;
var<workgroup> Ps: array<f32, ${B * B}>;
var<workgroup> red: array<f32, ${B * 8}>;
${entry(TW)} {
  let id = wg_lin(wg, nwg);
  if (id >= P.B * P.H * P.nqb) { return; }
  let qb = id % P.nqb;
  let h = (id / P.nqb) % P.H;
  let b = id / (P.nqb * P.H);
  let kh = (h * P.Hkv) / P.H;
  let q0 = qb * BB;
  let rg = li / 8u;
  let cg = li % 8u;
  for (var e = li; e < BB * DH; e = e + ${TW}u) {
    let qi = q0 + e / DH;
    var val: f32 = 0.0;
    if (qi < P.S) { val = b_q[P.qoff + qidx(b, qi, h) + e % DH] * P.scale; }
    Qs[(e / DH) * KS + e % DH] = val;
  }
  var m: array<f32, RPT>;
  var l: array<f32, RPT>;
  var acc: array<f32, ${RPT * DPT}>;
  for (var i = 0u; i < RPT; i = i + 1u) { m[i] = ${NEG}; l[i] = 0.0; }
  for (var u = 0u; u < RPT * DPT; u = u + 1u) { acc[u] = 0.0; }
  let qlast = min(q0 + BB, P.S) - 1u;
  for (var k0 = 0u; k0 <= qlast; k0 = k0 + BB) {
    ${LOAD_KV}
    workgroupBarrier();
    // scores for rows rg·RPT + i, keys cg + 8c
    var sc: array<f32, ${RPT * CPT}>;
    for (var u = 0u; u < RPT * CPT; u = u + 1u) { sc[u] = 0.0; }
    for (var d = 0u; d < DH; d = d + 1u) {
      var qv: array<f32, RPT>;
      for (var i = 0u; i < RPT; i = i + 1u) { qv[i] = Qs[(rg * RPT + i) * KS + d]; }
      for (var c = 0u; c < CPT; c = c + 1u) {
        let kv = Ks[(cg + 8u * c) * KS + d];
        for (var i = 0u; i < RPT; i = i + 1u) { sc[i * CPT + c] = sc[i * CPT + c] + qv[i] * kv; }
      }
    }
    // causal mask, partial row max
    for (var i = 0u; i < RPT; i = i + 1u) {
      let qi = q0 + rg * RPT + i;
      var pm: f32 = ${NEG};
      for (var c = 0u; c < CPT; c = c + 1u) {
        if (k0 + cg + 8u * c > qi || qi >= P.S) { sc[i * CPT + c] = ${NEG}; }
        pm = max(pm, sc[i * CPT + c]);
      }
      red[(rg * RPT + i) * 8u + cg] = pm;
    }
    workgroupBarrier();
    var mn: array<f32, RPT>;
    var alpha: array<f32, RPT>;
    for (var i = 0u; i < RPT; i = i + 1u) {
      var mx = m[i];
      for (var g = 0u; g < 8u; g = g + 1u) { mx = max(mx, red[(rg * RPT + i) * 8u + g]); }
      mn[i] = mx;
      alpha[i] = exp(m[i] - mx);
    }
    workgroupBarrier();
    for (var i = 0u; i < RPT; i = i + 1u) {
      var ps: f32 = 0.0;
      for (var c = 0u; c < CPT; c = c + 1u) {
        let p = exp(sc[i * CPT + c] - mn[i]);
        Ps[(rg * RPT + i) * BB + cg + 8u * c] = p;
        ps = ps + p;
      }
      red[(rg * RPT + i) * 8u + cg] = ps;
    }
    workgroupBarrier();
    for (var i = 0u; i < RPT; i = i + 1u) {
      var rs: f32 = 0.0;
      for (var g = 0u; g < 8u; g = g + 1u) { rs = rs + red[(rg * RPT + i) * 8u + g]; }
      l[i] = l[i] * alpha[i] + rs;
      m[i] = mn[i];
      for (var t = 0u; t < DPT; t = t + 1u) { acc[i * DPT + t] = acc[i * DPT + t] * alpha[i]; }
    }
    // O += P·V for rows rg·RPT + i, dims cg + 8t
    ${accumulateRowsTimesTile("Ps", "Vs")}
    workgroupBarrier();
  }
  for (var i = 0u; i < RPT; i = i + 1u) {
    let qi = q0 + rg * RPT + i;
    if (qi < P.S) {
      for (var t = 0u; t < DPT; t = t + 1u) {
        let d = cg + 8u * t;
        if (d < DH) { b_out[P.ooff + qidx(b, qi, h) + d] = acc[i * DPT + t] / l[i]; }
      }
      if (cg == 0u) { b_lse[P.loff + ridx(b, h, qi)] = m[i] + log(l[i]); }
    }
  }
}`,
  }));
  return { kernel, bufs: [q, k, v, out, lse], params: [Bt, S, H, Hkv, qoff, koff, voff, ooff, loff, nqb, scale], workgroups: Bt * H * nqb };
}

/** Launches of the tiled backward (block size `B` ∈ {16, 32}): the delta kernel of attention.ts
 * (Δ [B, H, S] into the scratch `delta` from element 0, as the per-row backward), then the tiled
 * dQ and dK/dV kernels. Register blocking as in the forward: for the score tile an invocation holds
 * B/16 rows × B/8 columns of S and dO·Vᵀ; for the products an invocation holds B/16 rows (query
 * rows for dQ, key rows for dK/dV) × ⌈D/8⌉ head dims. */
export function attentionTiledBackwardLaunches(
  q: Buf, qoff: number, k: Buf, koff: number, v: Buf, voff: number, out: Buf, ooff: number, lse: Buf, loff: number,
  dout: Buf, dooff: number, dq: Buf, dqoff: number, dk: Buf, dkoff: number, dv: Buf, dvoff: number, delta: Buf,
  Bt: number, S: number, H: number, Hkv: number, D: number, scale: number, B: number,
): Launch[] {
  if (Bt * S === 0 || D === 0) return [];
  if (B !== 16 && B !== 32) throw new Error(`attentionTiledBackwardLaunches: block size must be 16 or 32, got ${B}`);
  const nb = Math.ceil(S / B);
  const consts = `const RPT: u32 = ${B / 16}u;
const CPT: u32 = ${B / 8}u;
const DPT: u32 = ${Math.ceil(D / 8)}u;
`;
  // scores S = Q·Kᵀ and dP = dO·Vᵀ for rows rg·RPT + i of the query tile, keys cg + 8c of the key
  // tile; then P and dS with the causal mask, into Ps (optional) and Ds.
  const scoreBlock = (writeP: boolean): string => `
    var sc: array<f32, ${(B / 16) * (B / 8)}>;
    var dp: array<f32, ${(B / 16) * (B / 8)}>;
    for (var u = 0u; u < RPT * CPT; u = u + 1u) { sc[u] = 0.0; dp[u] = 0.0; }
    for (var d = 0u; d < DH; d = d + 1u) {
      var qv: array<f32, RPT>;
      var ov: array<f32, RPT>;
      for (var i = 0u; i < RPT; i = i + 1u) { qv[i] = Qs[(rg * RPT + i) * KS + d]; ov[i] = Os[(rg * RPT + i) * KS + d]; }
      for (var c = 0u; c < CPT; c = c + 1u) {
        let kv = Ks[(cg + 8u * c) * KS + d];
        let vv = Vs[(cg + 8u * c) * KS + d];
        for (var i = 0u; i < RPT; i = i + 1u) {
          sc[i * CPT + c] = sc[i * CPT + c] + qv[i] * kv;
          dp[i * CPT + c] = dp[i * CPT + c] + ov[i] * vv;
        }
      }
    }
    for (var i = 0u; i < RPT; i = i + 1u) {
      let qi = q0 + rg * RPT + i;
      for (var c = 0u; c < CPT; c = c + 1u) {
        let kj = k0 + cg + 8u * c;
        var p: f32 = 0.0;
        var ds: f32 = 0.0;
        if (kj <= qi && qi < P.S) {
          p = exp(sc[i * CPT + c] * P.scale - rL[i]);
          ds = p * (dp[i * CPT + c] - rD[i]);
        }
        ${writeP ? "Ps[(rg * RPT + i) * BB + cg + 8u * c] = p;" : ""}
        Ds[(rg * RPT + i) * BB + cg + 8u * c] = ds;
      }
    }`;
  const loadQO = `
    for (var e = li; e < BB * DH; e = e + ${TW}u) {
      let qi = q0 + e / DH;
      var qv: f32 = 0.0;
      var ov: f32 = 0.0;
      if (qi < P.S) { let o = qidx(b, qi, h) + e % DH; qv = b_q[P.qoff + o]; ov = b_do[P.dooff + o]; }
      Qs[(e / DH) * KS + e % DH] = qv;
      Os[(e / DH) * KS + e % DH] = ov;
    }
    var rL: array<f32, RPT>;
    var rD: array<f32, RPT>;
    for (var i = 0u; i < RPT; i = i + 1u) {
      let qi = q0 + rg * RPT + i;
      rL[i] = 0.0;
      rD[i] = 0.0;
      if (qi < P.S) { rL[i] = b_lse[P.loff + ridx(b, h, qi)]; rD[i] = b_delta[ridx(b, h, qi)]; }
    }`;
  const tiles = `var<workgroup> Qs: array<f32, ${B * (D + 1)}>;
var<workgroup> Os: array<f32, ${B * (D + 1)}>;
var<workgroup> Ks: array<f32, ${B * (D + 1)}>;
var<workgroup> Vs: array<f32, ${B * (D + 1)}>;
var<workgroup> Ds: array<f32, ${B * B}>;
`;
  const dqLabel = `attention_tiled_dq_d${D}_b${B}`;
  const dqK: Kernel = memoKernel(dqLabel, () => ({
    label: dqLabel,
    buffers: attentionBackwardBuffers("b_dq"),
    params: [...u32s("B", "S", "H", "Hkv", "qoff", "koff", "voff", "loff", "dooff", "dqoff", "nb"), ...f32s("scale")],
    code: `${header(D, B)}${consts}${tiles}
${entry(TW)} {
  let id = wg_lin(wg, nwg);
  if (id >= P.B * P.H * P.nb) { return; }
  let qb = id % P.nb;
  let h = (id / P.nb) % P.H;
  let b = id / (P.nb * P.H);
  let kh = (h * P.Hkv) / P.H;
  let q0 = qb * BB;
  let rg = li / 8u;
  let cg = li % 8u;
  ${loadQO}
  var acc: array<f32, ${(B / 16) * Math.ceil(D / 8)}>;
  for (var u = 0u; u < RPT * DPT; u = u + 1u) { acc[u] = 0.0; }
  let qlast = min(q0 + BB, P.S) - 1u;
  for (var k0 = 0u; k0 <= qlast; k0 = k0 + BB) {
    ${LOAD_KV}
    workgroupBarrier();
    ${scoreBlock(false)}
    workgroupBarrier();
    ${accumulateRowsTimesTile("Ds", "Ks")}
    workgroupBarrier();
  }
  for (var i = 0u; i < RPT; i = i + 1u) {
    let qi = q0 + rg * RPT + i;
    if (qi < P.S) {
      for (var t = 0u; t < DPT; t = t + 1u) {
        let d = cg + 8u * t;
        if (d < DH) { b_dq[P.dqoff + qidx(b, qi, h) + d] = acc[i * DPT + t] * P.scale; }
      }
    }
  }
}`,
  }));
  const dkvLabel = `attention_tiled_dkv_d${D}_b${B}`;
  const dkvK: Kernel = memoKernel(dkvLabel, () => ({
    label: dkvLabel,
    buffers: attentionBackwardBuffers("b_dk", "b_dv"),
    params: [...u32s("B", "S", "H", "Hkv", "qoff", "koff", "voff", "loff", "dooff", "dkoff", "dvoff", "nb"), ...f32s("scale")],
    code: `${header(D, B)}${consts}${tiles}var<workgroup> Ps: array<f32, ${B * B}>;
${entry(TW)} {
  let id = wg_lin(wg, nwg);
  if (id >= P.B * P.Hkv * P.nb) { return; }
  let kb = id % P.nb;
  let kh = (id / P.nb) % P.Hkv;
  let b = id / (P.nb * P.Hkv);
  let k0 = kb * BB;
  let rg = li / 8u;
  let cg = li % 8u;
  ${LOAD_KV}
  var adk: array<f32, ${(B / 16) * Math.ceil(D / 8)}>;
  var adv: array<f32, ${(B / 16) * Math.ceil(D / 8)}>;
  for (var u = 0u; u < RPT * DPT; u = u + 1u) { adk[u] = 0.0; adv[u] = 0.0; }
  for (var h = 0u; h < P.H; h = h + 1u) {
    if ((h * P.Hkv) / P.H != kh) { continue; }
    for (var q0 = k0; q0 < P.S; q0 = q0 + BB) {
      ${loadQO}
      workgroupBarrier();
      ${scoreBlock(true)}
      workgroupBarrier();
      // key rows rg·RPT + i, dims cg + 8t: dV += Σ_r P[r, j]·dO[r, d], dK += Σ_r dS[r, j]·Q[r, d]
      for (var r = 0u; r < BB; r = r + 1u) {
        var pv: array<f32, RPT>;
        var dsv: array<f32, RPT>;
        for (var i = 0u; i < RPT; i = i + 1u) { pv[i] = Ps[r * BB + rg * RPT + i]; dsv[i] = Ds[r * BB + rg * RPT + i]; }
        for (var t = 0u; t < DPT; t = t + 1u) {
          let d = cg + 8u * t;
          if (d < DH) {
            let ov = Os[r * KS + d];
            let qv = Qs[r * KS + d];
            for (var i = 0u; i < RPT; i = i + 1u) {
              adv[i * DPT + t] = adv[i * DPT + t] + pv[i] * ov;
              adk[i * DPT + t] = adk[i * DPT + t] + dsv[i] * qv;
            }
          }
        }
      }
      workgroupBarrier();
    }
  }
  for (var i = 0u; i < RPT; i = i + 1u) {
    let kj = k0 + rg * RPT + i;
    if (kj < P.S) {
      for (var t = 0u; t < DPT; t = t + 1u) {
        let d = cg + 8u * t;
        if (d < DH) {
          let o = kidx(b, kj, kh) + d;
          b_dk[P.dkoff + o] = adk[i * DPT + t] * P.scale;
          b_dv[P.dvoff + o] = adv[i * DPT + t];
        }
      }
    }
  }
}`,
  }));
  return [
    attentionDeltaLaunch(out, ooff, dout, dooff, delta, Bt, S, H, D),
    { kernel: dqK, bufs: [q, k, v, lse, dout, delta, dq], params: [Bt, S, H, Hkv, qoff, koff, voff, loff, dooff, dqoff, nb, scale], workgroups: Bt * H * nb },
    { kernel: dkvK, bufs: [q, k, v, lse, dout, delta, dk, dv], params: [Bt, S, H, Hkv, qoff, koff, voff, loff, dooff, dkoff, dvoff, nb, scale], workgroups: Bt * Hkv * nb },
  ];
}
