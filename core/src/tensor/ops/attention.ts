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

function dims4(op: string, x: Tensor): [number, number, number, number] {
  if (x.ndim !== 4 || x.dtype !== "f32") throw new Error(`${op}: expected an f32 [batch, seq, heads, headDim] tensor, got ${x}`);
  return x.shape as unknown as [number, number, number, number];
}

/** RoPE on x [B, S, H, D] with positions 0..S−1: pairs (i, i + D/2), angle pos·f_i with
 * f_i = theta^(−2i/D), or f_i from a table of D/2 inverse frequencies (scaled RoPE:
 * models/rope-scaling.ts). Backward applies the inverse rotation. @throws if D is odd. */
export function rope(x: Tensor, theta: RopeFreq): Tensor {
  const [B, S, H, D] = dims4("rope", x);
  if (D % 2 !== 0) throw new Error(`rope: head dim ${D} must be even (${x})`);
  const be = x.be;
  const out = empty(be, x.shape);
  if (out.numel > 0) be.rope(x.view, out.view, B, S, H, D, theta, false);
  return record("rope", [x], out, (g) => {
    accumulateGrad(x, (dst) => be.rope(g.view, dst, B, S, H, D, theta, true), false);
  });
}

/**
 * Causal attention: softmax(q·kᵀ·scale + causal mask)·v per head. q [B, S, H, D], k and v
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
  if (out.numel > 0) be.attention(q.view, k.view, v.view, out.view, lse.view, B, S, H, Hkv, D, scale);
  return record("attention", [q, k, v], out, (g) => {
    if (out.numel === 0) return;
    const targets = [q, k, v].map((t) => {
      const tg = gradTarget(t, "overwrite");
      if (tg) return { view: tg.view as View, done: () => tg.commit() };
      const s = scratch(be, t.numel);
      return { view: s.view, done: () => s.free() };
    });
    be.attentionBackward(q.view, k.view, v.view, out.view, lse.view, g.view, targets[0]!.view, targets[1]!.view, targets[2]!.view, B, S, H, Hkv, D, scale);
    for (const t of targets) t.done();
    lse.dispose();
  });
}
