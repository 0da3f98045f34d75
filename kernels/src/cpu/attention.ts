/**
 * Causal scaled-dot-product attention with grouped-query heads on the cpu backend, forward and
 * backward (the math of FlashAttention-2, Dao 2023, §2: the backward recomputes P from the saved
 * row logsumexp). Head h reads kv head floor(h·Hkv/H). Everything is computed in float64; dk/dv
 * are accumulated in float64 scratch (over query heads of a group, then queries, ascending) and
 * stored once, so results are deterministic.
 *
 * Layouts: q, out, dq [B, S, H, D]; k, v, dk, dv [B, S, Hkv, D]; lse [B, H, S].
 */

import type { FArr } from "./store.ts";

/** out = softmax(scale·q·kᵀ + causal mask)·v; lse[b,h,i] = logsumexp_j≤i(scale·q_i·k_j). */
export function attentionF(q: FArr, qo: number, k: FArr, ko: number, v: FArr, vo: number, out: FArr, oo: number, lse: FArr, lo: number, B: number, S: number, H: number, Hkv: number, D: number, scale: number): void {
  const scores = new Float64Array(S);
  const acc = new Float64Array(D);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const hk = Math.floor((h * Hkv) / H);
      for (let i = 0; i < S; i++) {
        const qp = qo + ((b * S + i) * H + h) * D;
        let mx = -Infinity;
        for (let j = 0; j <= i; j++) {
          const kp = ko + ((b * S + j) * Hkv + hk) * D;
          let s = 0;
          for (let d = 0; d < D; d++) s += q[qp + d]! * k[kp + d]!;
          s *= scale;
          scores[j] = s;
          if (s > mx) mx = s;
        }
        let sum = 0;
        acc.fill(0);
        for (let j = 0; j <= i; j++) {
          const p = Math.exp(scores[j]! - mx);
          sum += p;
          const vp = vo + ((b * S + j) * Hkv + hk) * D;
          for (let d = 0; d < D; d++) acc[d] = acc[d]! + p * v[vp + d]!;
        }
        const inv = 1 / sum;
        const op = oo + ((b * S + i) * H + h) * D;
        for (let d = 0; d < D; d++) out[op + d] = acc[d]! * inv;
        lse[lo + (b * H + h) * S + i] = mx + Math.log(sum);
      }
    }
  }
}

/** dq, dk, dv (overwritten) from dout, with P_ij = exp(scale·q_i·k_j − lse_i), D_i = dout_i·out_i,
 * dS_ij = P_ij (dout_i·v_j − D_i): dq_i = scale Σ_j dS_ij k_j, dk_j = scale Σ_i dS_ij q_i,
 * dv_j = Σ_i P_ij dout_i (dk/dv also summed over the query heads sharing a kv head). */
export function attentionBackwardF(q: FArr, qo: number, k: FArr, ko: number, v: FArr, vo: number, out: FArr, oo: number, lse: FArr, lo: number, dout: FArr, go: number, dq: FArr, dqo: number, dk: FArr, dko: number, dv: FArr, dvo: number, B: number, S: number, H: number, Hkv: number, D: number, scale: number): void {
  const nkv = B * S * Hkv * D;
  const dkAcc = new Float64Array(nkv);
  const dvAcc = new Float64Array(nkv);
  const dqRow = new Float64Array(D);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const hk = Math.floor((h * Hkv) / H);
      for (let i = 0; i < S; i++) {
        const qp = qo + ((b * S + i) * H + h) * D;
        const gp = go + ((b * S + i) * H + h) * D;
        const op = oo + ((b * S + i) * H + h) * D;
        const l = lse[lo + (b * H + h) * S + i]!;
        let Di = 0;
        for (let d = 0; d < D; d++) Di += dout[gp + d]! * out[op + d]!;
        dqRow.fill(0);
        for (let j = 0; j <= i; j++) {
          const kvBase = ((b * S + j) * Hkv + hk) * D;
          const kp = ko + kvBase;
          const vp = vo + kvBase;
          let s = 0;
          let dp = 0;
          for (let d = 0; d < D; d++) {
            s += q[qp + d]! * k[kp + d]!;
            dp += dout[gp + d]! * v[vp + d]!;
          }
          const p = Math.exp(s * scale - l);
          const ds = p * (dp - Di) * scale;
          for (let d = 0; d < D; d++) {
            dqRow[d] = dqRow[d]! + ds * k[kp + d]!;
            dkAcc[kvBase + d] = dkAcc[kvBase + d]! + ds * q[qp + d]!;
            dvAcc[kvBase + d] = dvAcc[kvBase + d]! + p * dout[gp + d]!;
          }
        }
        const dqp = dqo + ((b * S + i) * H + h) * D;
        for (let d = 0; d < D; d++) dq[dqp + d] = dqRow[d]!;
      }
    }
  }
  for (let t = 0; t < nkv; t++) {
    dk[dko + t] = dkAcc[t]!;
    dv[dvo + t] = dvAcc[t]!;
  }
}
