/**
 * Transformer pieces on [batch, seq, heads, headDim] tensors (the layout q/k/v projections produce,
 * so no transposes are needed):
 * - rotary position embedding (Su et al. 2021, RoFormer) in Hugging Face's rotate_half layout;
 * - causal scaled-dot-product attention with grouped-query heads (Ainslie et al. 2023), computed by
 *   the backend with a saved row logsumexp (FlashAttention-style backward, Dao et al. 2022).
 */
import type { RopeFreq, View } from "@zeromoe/kernels";
import { accumulateGrad, gradTarget, record, scratch } from "../tape.ts";
import { Tensor, empty } from "../tensor.ts";
import { segmentsFor, type SequenceSegments } from "./sequence-segments.ts";

function dims4(op: string, x: Tensor): [number, number, number, number] {
  if (x.ndim !== 4 || x.dtype !== "f32") throw new Error(`${op}: expected an f32 [batch, seq, heads, headDim] tensor, got ${x}`);
  return x.shape as unknown as [number, number, number, number];
}

/** RoPE on x [B, S, H, D] with positions 0..S−1 (0..length−1 within each segment when packed
 * segments are active, sequence-segments.ts): pairs (i, i + D/2), angle pos·f_i with
 * f_i = theta^(−2i/D), or f_i from a table of D/2 inverse frequencies (scaled RoPE:
 * models/rope-scaling.ts). Backward applies the inverse rotation. @throws if D is odd. */
export function rope(x: Tensor, theta: RopeFreq): Tensor {
  const [B, S, H, D] = dims4("rope", x);
  if (D % 2 !== 0) throw new Error(`rope: head dim ${D} must be even (${x})`);
  const be = x.be;
  const out = empty(be, x.shape);
  const segs = segmentsFor("rope", B, S);
  // packed rows: positions restart at 0 in each segment (sequence-segments.ts)
  const apply = (src: View, dst: View, inverse: boolean): void => {
    if (segs === null) return be.rope(src, dst, B, S, H, D, theta, inverse);
    for (const r of segs.runs) {
      const off = (r.row * S + r.start) * H * D;
      be.rope(at(src, off), at(dst, off), 1, r.length, H, D, theta, inverse);
    }
  };
  if (out.numel > 0) apply(x.view, out.view, false);
  return record("rope", [x], out, (g) => {
    accumulateGrad(x, (dst) => apply(g.view, dst, true), false);
  });
}

/** `v` moved `off` elements on. */
function at(v: View, off: number): View {
  return { buf: v.buf, off: v.off + off };
}

/** Attention forward (and below, backward) of packed rows: the backend's causal kernels once per
 * segment on its contiguous rows (sequence-segments.ts); lse [B·H·S] holds each segment's
 * [H, length] block one after another. */
function segmentAttention(be: Tensor["be"], segs: SequenceSegments, q: View, k: View, v: View, out: View, lse: View, S: number, H: number, Hkv: number, D: number, scale: number): void {
  let lo = 0;
  for (const r of segs.runs) {
    const row = r.row * S + r.start;
    be.attention(at(q, row * H * D), at(k, row * Hkv * D), at(v, row * Hkv * D), at(out, row * H * D), at(lse, lo), 1, r.length, H, Hkv, D, scale);
    lo += H * r.length;
  }
}

function segmentAttentionBackward(be: Tensor["be"], segs: SequenceSegments, q: View, k: View, v: View, out: View, lse: View, g: View, dq: View, dk: View, dv: View, S: number, H: number, Hkv: number, D: number, scale: number): void {
  let lo = 0;
  for (const r of segs.runs) {
    const row = r.row * S + r.start;
    const qo = row * H * D;
    const ko = row * Hkv * D;
    be.attentionBackward(at(q, qo), at(k, ko), at(v, ko), at(out, qo), at(lse, lo), at(g, qo), at(dq, qo), at(dk, ko), at(dv, ko), 1, r.length, H, Hkv, D, scale);
    lo += H * r.length;
  }
}

/**
 * Causal attention: softmax(q·kᵀ·scale + causal mask)·v per head; with packed segments active
 * (sequence-segments.ts) the mask is also confined to each segment. q [B, S, H, D], k and v
 * [B, S, Hkv, D] with H % Hkv == 0 (head h reads kv head floor(h·Hkv/H)). Returns [B, S, H, D].
 * @throws on mismatched shapes.
 */
export function causalAttention(q: Tensor, k: Tensor, v: Tensor, scale: number): Tensor {
  const [B, S, H, D] = dims4("attention q", q);
  const [Bk, Sk, Hkv, Dk] = dims4("attention k", k);
  const [Bv, Sv, Hv, Dv] = dims4("attention v", v);
  if (Bk !== B || Sk !== S || Dk !== D || Bv !== B || Sv !== S || Hv !== Hkv || Dv !== D) {
    throw new Error(`attention: q ${q}, k ${k}, v ${v} must be [B,S,H,D], [B,S,Hkv,D], [B,S,Hkv,D]`);
  }
  if (Hkv === 0 || H % Hkv !== 0) throw new Error(`attention: query heads ${H} must be a multiple of kv heads ${Hkv}`);
  const be = q.be;
  const out = empty(be, q.shape);
  const lse = empty(be, [Math.max(B * H * S, 1)]);
  const segs = segmentsFor("attention", B, S);
  if (out.numel > 0) {
    if (segs) segmentAttention(be, segs, q.view, k.view, v.view, out.view, lse.view, S, H, Hkv, D, scale);
    else be.attention(q.view, k.view, v.view, out.view, lse.view, B, S, H, Hkv, D, scale);
  }
  return record("attention", [q, k, v], out, (g) => {
    if (out.numel === 0) return;
    const targets = [q, k, v].map((t) => {
      const tg = gradTarget(t, "overwrite");
      if (tg) return { view: tg.view as View, done: () => tg.commit() };
      const s = scratch(be, t.numel);
      return { view: s.view, done: () => s.free() };
    });
    if (segs) segmentAttentionBackward(be, segs, q.view, k.view, v.view, out.view, lse.view, g.view, targets[0]!.view, targets[1]!.view, targets[2]!.view, S, H, Hkv, D, scale);
    else be.attentionBackward(q.view, k.view, v.view, out.view, lse.view, g.view, targets[0]!.view, targets[1]!.view, targets[2]!.view, B, S, H, Hkv, D, scale);
    for (const t of targets) t.done();
    lse.dispose();
  });
}
