/**
 * Multi-head latent attention (DeepSeek-V2, DeepSeek-AI 2024, §2.1; Transformers 5.17's
 * `DeepseekV2Attention` / `DeepseekV3Attention`) on normed hidden states x [B·S, hidden]:
 *
 *   q        = q_b_proj(q_a_layernorm(q_a_proj(x)))  (q_lora_rank set)  or  q_proj(x)     [B·S, H·qk]
 *   q_nope, q_rot = split(q per head, [qk_nope, qk_rope])
 *   c, k_rot = split(kv_a_proj_with_mqa(x), [kv_lora_rank, qk_rope])      one k_rot for all heads
 *   k_nope, v = split(kv_b_proj(kv_a_layernorm(c)) per head, [qk_nope, v_head_dim])
 *   q_rot, k_rot = RoPE(q_rot), RoPE(k_rot)
 *   attn     = causal softmax([q_nope, a²·q_rot]·[k_nope, k_rot]ᵀ · m²·qk^−½) · v       qk = qk_nope + qk_rope
 *   out      = o_proj(attn)                                                          [B·S, hidden]
 *
 * RoPE on interleaved pairs (x[2i], x[2i+1]) — DeepSeek-V2's complex rotation, DeepSeek-V3 with
 * `rope_interleave` — is the rotate-half RoPE after the permutation (evens, then odds) of the rope
 * part, applied to q and k alike (Transformers' `apply_rotary_pos_emb_interleave`); the scores do
 * not depend on the order of the dimensions, so V2's layout-preserving rotation gives the same.
 * With a rope scaling (rope-scaling.ts), RoPE uses the scaled frequencies, a is its attention
 * factor (Transformers multiplies the rotated q and k by it through cos/sin: a² on the rotated
 * part's scores) and m DeepSeek's mscale (m(factor, mscale_all_dim) for YaRN, else 1; Transformers'
 * DeepseekV3Attention multiplies its softmax scale by m²); both are 1 unscaled.
 * Values narrower than qk are padded with zero columns for the fused attention kernel and the
 * padding is dropped from the output (it receives exact zeros).
 */
import type { Parameter, ParamSpec, UnitSet } from "../nn/unit.ts";
import type { RopeFreq } from "@zeromoe/kernels";
import { causalAttention, concatRows, fromArray, gatherRows, linear, reshape, rmsnorm, rope, scale, sliceRows, transpose } from "../tensor/index.ts";
import type { Tensor } from "../tensor/tensor.ts";

/** The shape of one MLA layer (DeepSeek config keys). */
export interface MLAShape {
  hidden: number;
  heads: number;
  qLoraRank: number | null;
  kvLoraRank: number;
  qkNope: number;
  qkRope: number;
  v: number;
  eps: number;
  /** The rope frequencies of a forward over `positions` positions (rope-scaling.ts ropeFreqOf). */
  ropeFreq: (positions: number) => RopeFreq;
  /** The rope scaling's attention factor a (module comment; 1 unscaled). */
  ropeFactor: number;
  /** DeepSeek's softmax mscale m (module comment; 1 unscaled). */
  softmaxMscale: number;
  /** RoPE on interleaved pairs (module comment). */
  interleave: boolean;
}

/** Parameters of one MLA layer. */
export interface MLAParams {
  /** q_proj (no q_lora_rank) or null. */
  q: Parameter | null;
  /** q_a_proj, q_a_layernorm, q_b_proj (q_lora_rank) or null. */
  qA: Parameter | null;
  qANorm: Parameter | null;
  qB: Parameter | null;
  kvA: Parameter;
  kvANorm: Parameter;
  kvB: Parameter;
  o: Parameter;
}

/** Parameter declarations of the MLA of layer prefix `pre` (`model.layers.{l}`), HF names. */
export function mlaSpecs(pre: string, s: MLAShape, normal: { kind: "normal"; std: number }): ParamSpec[] {
  const qk = s.qkNope + s.qkRope;
  const a = `${pre}.self_attn`;
  const q: ParamSpec[] = s.qLoraRank === null
    ? [{ name: `${a}.q_proj.weight`, shape: [s.heads * qk, s.hidden], init: normal }]
    : [
        { name: `${a}.q_a_proj.weight`, shape: [s.qLoraRank, s.hidden], init: normal },
        { name: `${a}.q_a_layernorm.weight`, shape: [s.qLoraRank], init: { kind: "ones" } },
        { name: `${a}.q_b_proj.weight`, shape: [s.heads * qk, s.qLoraRank], init: normal },
      ];
  return [
    ...q,
    { name: `${a}.kv_a_proj_with_mqa.weight`, shape: [s.kvLoraRank + s.qkRope, s.hidden], init: normal },
    { name: `${a}.kv_a_layernorm.weight`, shape: [s.kvLoraRank], init: { kind: "ones" } },
    { name: `${a}.kv_b_proj.weight`, shape: [s.heads * (s.qkNope + s.v), s.kvLoraRank], init: normal },
    { name: `${a}.o_proj.weight`, shape: [s.hidden, s.heads * s.v], init: normal },
  ];
}

/** The MLA parameters of layer prefix `pre` in `units`. */
export function mlaParams(units: UnitSet, pre: string, s: MLAShape): MLAParams {
  const P = (n: string) => units.param(`${pre}.self_attn.${n}.weight`);
  const lora = s.qLoraRank !== null;
  return {
    q: lora ? null : P("q_proj"),
    qA: lora ? P("q_a_proj") : null,
    qANorm: lora ? P("q_a_layernorm") : null,
    qB: lora ? P("q_b_proj") : null,
    kvA: P("kv_a_proj_with_mqa"),
    kvANorm: P("kv_a_layernorm"),
    kvB: P("kv_b_proj"),
    o: P("o_proj"),
  };
}

/** Columns [start, start + n) of x [rows, cols] → [rows, n] (differentiable). */
function cols(x: Tensor, start: number, n: number): Tensor {
  return transpose(sliceRows(transpose(x, 0, 1), start, n), 0, 1);
}

/** [a | b] along columns of a [rows, ca], b [rows, cb] → [rows, ca + cb] (differentiable). */
function catCols(a: Tensor, b: Tensor): Tensor {
  return transpose(concatRows([transpose(a, 0, 1), transpose(b, 0, 1)]), 0, 1);
}

/** x [rows, d] with its last axis reordered to (x0, x2, …, x1, x3, …) (module comment). */
function deinterleave(x: Tensor): Tensor {
  const [rows, d] = x.shape as [number, number];
  return reshape(transpose(reshape(x, [rows, d / 2, 2]), 1, 2), [rows, d]);
}

/** RoPE of x [B·S·h, r] laid out [B, S, h, r] (interleaved pairs when `s.interleave`) → same shape. */
function ropeRows(x: Tensor, s: MLAShape, B: number, S: number, h: number): Tensor {
  const r = s.qkRope;
  const y = s.interleave ? deinterleave(x) : x;
  return reshape(rope(reshape(y, [B, S, h, r]), s.ropeFreq(S)), [B * S * h, r]);
}

/** Multi-head latent attention (module comment): x [B·S, hidden] → [B·S, hidden]. */
export function multiHeadLatentAttention(x: Tensor, p: MLAParams, s: MLAShape, B: number, S: number): Tensor {
  const N = B * S;
  const H = s.heads;
  const qk = s.qkNope + s.qkRope;
  const be = x.be;
  const qFull = p.q ? linear(x, p.q.tensor) : linear(rmsnorm(linear(x, p.qA!.tensor), p.qANorm!.tensor, s.eps), p.qB!.tensor);
  const q = reshape(qFull, [N * H, qk]);
  const ckv = linear(x, p.kvA.tensor); // [N, r_kv + rope]
  const kv = reshape(linear(rmsnorm(cols(ckv, 0, s.kvLoraRank), p.kvANorm.tensor, s.eps), p.kvB.tensor), [N * H, s.qkNope + s.v]);
  const qRotated = ropeRows(cols(q, s.qkNope, s.qkRope), s, B, S, H);
  const qRot = s.ropeFactor === 1 ? qRotated : scale(qRotated, s.ropeFactor * s.ropeFactor);
  const kRot1 = ropeRows(cols(ckv, s.kvLoraRank, s.qkRope), s, B, S, 1); // [N, rope], shared by the heads
  const perHead = Int32Array.from({ length: N * H }, (_, i) => Math.floor(i / H));
  const kRot = gatherRows(kRot1, fromArray(be, perHead, [N * H], "i32"));
  let query = catCols(cols(q, 0, s.qkNope), qRot);
  let key = catCols(cols(kv, 0, s.qkNope), kRot);
  let value = cols(kv, s.qkNope, s.v);
  const D = Math.max(qk, s.v);
  const zeros = (n: number) => fromArray(be, new Float32Array(N * H * n), [N * H, n]);
  if (s.v < D) value = catCols(value, zeros(D - s.v));
  if (qk < D) {
    query = catCols(query, zeros(D - qk));
    key = catCols(key, zeros(D - qk));
  }
  const o = causalAttention(reshape(query, [B, S, H, D]), reshape(key, [B, S, H, D]), reshape(value, [B, S, H, D]), (s.softmaxMscale * s.softmaxMscale) / Math.sqrt(qk));
  let out = reshape(o, [N * H, D]);
  if (s.v < D) out = cols(out, 0, s.v);
  return linear(reshape(out, [N, H * s.v]), p.o.tensor);
}
