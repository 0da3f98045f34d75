/**
 * Float64 reference for rotary embeddings and grouped-query attention (causal, or over all keys).
 * RoPE follows Hugging Face `apply_rotary_pos_emb`: y = x·cos + rotate_half(x)·sin with
 * rotate_half([x1, x2]) = [−x2, x1] and cos/sin of pos·θ^(−2i/D) repeated over both halves.
 * Attention builds the full score matrix per (b, h); the backward uses matrix identities
 * dV = Pᵀ dO, dP = dO Vᵀ, dS = P ⊙ (dP − rowsum(dP ⊙ P)), dQ = s·dS K, dK = s·dSᵀ Q.
 */

/** RoPE of x [B, S, H, D] (inverse: rotation by −angle). */
export function refRope(x: ArrayLike<number>, B: number, S: number, H: number, D: number, theta: number | Float64Array, inverse: boolean): Float64Array {
  const y = new Float64Array(B * S * H * D);
  const half = D / 2;
  for (let b = 0; b < B; b++)
    for (let s = 0; s < S; s++)
      for (let h = 0; h < H; h++) {
        const base = ((b * S + s) * H + h) * D;
        for (let d = 0; d < D; d++) {
          const i = d % half;
          const ang = typeof theta === "number" ? s / Math.pow(theta, (2 * i) / D) : s * theta[i]!;
          const sin = (inverse ? -1 : 1) * Math.sin(ang);
          const rot = d < half ? -x[base + d + half]! : x[base + d - half]!;
          y[base + d] = x[base + d]! * Math.cos(ang) + rot * sin;
        }
      }
  return y;
}

interface AttnShape {
  B: number;
  S: number;
  H: number;
  Hkv: number;
  D: number;
  scale: number;
  /** Causal mask (key j ≤ query i); default true. False: every query attends every key. */
  causal?: boolean;
}

const qi = (sh: AttnShape, b: number, s: number, h: number, d: number) => ((b * sh.S + s) * sh.H + h) * sh.D + d;
const kvi = (sh: AttnShape, b: number, s: number, h: number, d: number) => ((b * sh.S + s) * sh.Hkv + h) * sh.D + d;

/** P[i][j] (softmax of scaled scores, causal unless sh.causal is false) for one (b, h), plus the row logsumexp. */
function probs(q: ArrayLike<number>, k: ArrayLike<number>, sh: AttnShape, b: number, h: number): { P: number[][]; lse: number[] } {
  const g = Math.floor(h / (sh.H / sh.Hkv));
  const P: number[][] = [];
  const lse: number[] = [];
  for (let i = 0; i < sh.S; i++) {
    const sc: number[] = [];
    const last = sh.causal === false ? sh.S - 1 : i;
    for (let j = 0; j <= last; j++) {
      let s = 0;
      for (let d = 0; d < sh.D; d++) s += q[qi(sh, b, i, h, d)]! * k[kvi(sh, b, j, g, d)]!;
      sc.push(s * sh.scale);
    }
    const m = Math.max(...sc);
    const z = sc.reduce((a, v) => a + Math.exp(v - m), 0);
    lse.push(m + Math.log(z));
    P.push([...sc.map((v) => Math.exp(v - m) / z), ...new Array(sh.S - 1 - last).fill(0)]);
  }
  return { P, lse };
}

/** Forward: out [B, S, H, D], lse [B, H, S]. */
export function refAttention(q: ArrayLike<number>, k: ArrayLike<number>, v: ArrayLike<number>, sh: AttnShape): { out: Float64Array; lse: Float64Array } {
  const out = new Float64Array(sh.B * sh.S * sh.H * sh.D);
  const lse = new Float64Array(sh.B * sh.H * sh.S);
  for (let b = 0; b < sh.B; b++)
    for (let h = 0; h < sh.H; h++) {
      const g = Math.floor(h / (sh.H / sh.Hkv));
      const { P, lse: l } = probs(q, k, sh, b, h);
      for (let i = 0; i < sh.S; i++) {
        lse[(b * sh.H + h) * sh.S + i] = l[i]!;
        for (let d = 0; d < sh.D; d++) {
          let s = 0;
          for (let j = 0; j < sh.S; j++) s += P[i]![j]! * v[kvi(sh, b, j, g, d)]!;
          out[qi(sh, b, i, h, d)] = s;
        }
      }
    }
  return { out, lse };
}

/** Backward: dq [B, S, H, D], dk and dv [B, S, Hkv, D]. */
export function refAttentionBackward(q: ArrayLike<number>, k: ArrayLike<number>, v: ArrayLike<number>, dout: ArrayLike<number>, sh: AttnShape): { dq: Float64Array; dk: Float64Array; dv: Float64Array } {
  const dq = new Float64Array(sh.B * sh.S * sh.H * sh.D);
  const dk = new Float64Array(sh.B * sh.S * sh.Hkv * sh.D);
  const dv = new Float64Array(sh.B * sh.S * sh.Hkv * sh.D);
  const S = sh.S;
  for (let b = 0; b < sh.B; b++)
    for (let h = 0; h < sh.H; h++) {
      const g = Math.floor(h / (sh.H / sh.Hkv));
      const { P } = probs(q, k, sh, b, h);
      // dP = dO Vᵀ
      const dP: number[][] = [];
      for (let i = 0; i < S; i++) {
        dP.push([]);
        for (let j = 0; j < S; j++) {
          let s = 0;
          for (let d = 0; d < sh.D; d++) s += dout[qi(sh, b, i, h, d)]! * v[kvi(sh, b, j, g, d)]!;
          dP[i]!.push(s);
        }
      }
      const dS: number[][] = [];
      for (let i = 0; i < S; i++) {
        let rs = 0;
        for (let j = 0; j < S; j++) rs += dP[i]![j]! * P[i]![j]!;
        dS.push(P[i]!.map((p, j) => p * (dP[i]![j]! - rs)));
      }
      for (let d = 0; d < sh.D; d++) {
        for (let i = 0; i < S; i++) {
          let s = 0;
          for (let j = 0; j < S; j++) s += dS[i]![j]! * k[kvi(sh, b, j, g, d)]!;
          dq[qi(sh, b, i, h, d)] = sh.scale * s;
        }
        for (let j = 0; j < S; j++) {
          let sk = 0;
          let sv = 0;
          for (let i = 0; i < S; i++) {
            sk += dS[i]![j]! * q[qi(sh, b, i, h, d)]!;
            sv += P[i]![j]! * dout[qi(sh, b, i, h, d)]!;
          }
          dk[kvi(sh, b, j, g, d)] += sh.scale * sk;
          dv[kvi(sh, b, j, g, d)] += sv;
        }
      }
    }
  return { dq, dk, dv };
}
