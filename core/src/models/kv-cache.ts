/**
 * Key/value cache for autoregressive decoding (inference only, batch 1): the keys (after RoPE) and
 * values of every position already seen are kept per layer on the device, so each new token costs
 * one forward over that token plus attention over the cached positions, instead of a forward over
 * the whole window (Pope et al. 2022, "Efficiently Scaling Transformer Inference", §2; Hugging
 * Face's `past_key_values` / `DynamicCache`).
 *
 * Layout per layer: K and V are [Hkv, capacity, D] f32 (kv-head-major, so one kv head's keys are a
 * contiguous [positions, D] matrix), capacity = `max_position_embeddings`.
 *
 * {@link KVCache.attend} does a layer's attention given its pre-RoPE q [1, S, H, D] and k
 * [1, S, Hkv, D] and v [1, S, Hkv, D]:
 * - empty cache (the prompt): exactly the training path — `rope`, `causalAttention` — then the
 *   roped keys and the values are stored;
 * - otherwise one new token (S = 1) at position p: q and k are rotated by p with the RoPE rotation
 *   written as a D×D matrix (rotate_half layout, angles p·θ^(−2i/D) in float64, as the kernels
 *   compute them), the key and value are appended, and for each kv head h the g = H/Hkv query heads
 *   that share it (GQA: query head j reads kv head ⌊j·Hkv/H⌋) attend over its p + 1 cached
 *   positions: scores = q·Kᵀ·scale, row softmax, ·V (batched matmuls over the kv heads).
 * Results agree with the uncached forward to float rounding (test: core/test/models/kv-cache.test.ts).
 */
import type { Backend, Buf, RopeFreq } from "@zeromoe/kernels";
import type { ModelConfig } from "../config/types.ts";
import { causalAttention, empty, fromArray, isGradEnabled, matmul, permute, reshape, rope, type Tensor } from "../tensor/index.ts";

/** A layer's handle on a cache, passed to the attention of that layer. */
export interface LayerKV {
  cache: KVCache;
  layer: number;
}

/**
 * The RoPE rotation at position `pos` as a D×D matrix R (row vector x times R = rope(x) in the
 * rotate_half layout): y[i] = x[i]·cos − x[i+D/2]·sin, y[i+D/2] = x[i+D/2]·cos + x[i]·sin, angle
 * pos·θ^(−2i/D), or pos·f_i for a table of D/2 inverse frequencies (scaled RoPE). Row-major
 * Float32Array of D·D.
 * @throws on an odd D.
 */
export function ropeMatrix(pos: number, headDim: number, theta: RopeFreq): Float32Array {
  if (headDim % 2 !== 0) throw new Error(`ropeMatrix: head dim ${headDim} must be even`);
  const half = headDim / 2;
  if (typeof theta !== "number" && theta.length !== half) throw new Error(`ropeMatrix: ${theta.length} inverse frequencies for head dim ${headDim} (expected ${half})`);
  const R = new Float32Array(headDim * headDim);
  for (let i = 0; i < half; i++) {
    const ang = pos * (typeof theta === "number" ? Math.pow(theta, (-2 * i) / headDim) : theta[i]!);
    const c = Math.cos(ang);
    const s = Math.sin(ang);
    R[i * headDim + i] = c;
    R[(i + half) * headDim + (i + half)] = c;
    R[(i + half) * headDim + i] = -s;
    R[i * headDim + (i + half)] = s;
  }
  return R;
}

/** The per-layer key/value cache of one sequence (see the module comment). Free it with
 * {@link destroy}. */
export class KVCache {
  readonly capacity: number;
  private readonly H: number;
  private readonly Hkv: number;
  private readonly D: number;
  private readonly k: Buf[] = [];
  private readonly v: Buf[] = [];
  private readonly lens: number[];

  /**
   * Allocate K and V for every layer of `cfg` ([Hkv, capacity, D] f32 each, tag "activation").
   * @param capacity positions held (default and maximum `max_position_embeddings`).
   * @throws on a capacity outside 1..max_position_embeddings.
   */
  constructor(readonly be: Backend, cfg: ModelConfig, capacity = cfg.max_position_embeddings) {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > cfg.max_position_embeddings) {
      throw new Error(`KVCache: capacity must be an integer in 1..${cfg.max_position_embeddings} (max_position_embeddings), got ${capacity}`);
    }
    this.capacity = capacity;
    this.H = cfg.num_attention_heads;
    this.Hkv = cfg.num_key_value_heads;
    this.D = cfg.head_dim;
    const n = this.Hkv * capacity * this.D;
    for (let l = 0; l < cfg.num_hidden_layers; l++) {
      this.k.push(be.alloc("f32", n, "activation"));
      this.v.push(be.alloc("f32", n, "activation"));
    }
    this.lens = new Array<number>(cfg.num_hidden_layers).fill(0);
  }

  /** Positions cached (the same in every layer after a complete forward). */
  get length(): number {
    return this.lens[0] ?? 0;
  }

  /** Positions cached in `layer` (before its attend of a forward: the new positions' offset). */
  lengthOf(layer: number): number {
    return this.lens[layer] ?? 0;
  }

  /** True when every layer holds `n` positions (false when a model's attention ignored the cache). */
  filledTo(n: number): boolean {
    return this.lens.every((l) => l === n);
  }

  /** Forget every position (the buffers stay allocated). */
  reset(): void {
    this.lens.fill(0);
  }

  /** Free the device buffers; the cache cannot be used afterwards. */
  destroy(): void {
    for (const b of [...this.k, ...this.v]) this.be.free(b);
    this.k.length = 0;
    this.v.length = 0;
  }

  /**
   * Attention of `layer` over the cache plus the new positions (module comment), appending them.
   * q [1, S, H, D], k and v [1, S, Hkv, D], q and k before RoPE; returns [1, S, H, D].
   * @throws under gradient recording, for batch ≠ 1, more than one new token after the prompt, or
   *   positions past the capacity.
   */
  attend(layer: number, q: Tensor, k: Tensor, v: Tensor, theta: RopeFreq, scale: number): Tensor {
    if (isGradEnabled()) throw new Error("KVCache: inference only (run the forward under noGrad)");
    if (this.k.length === 0) throw new Error("KVCache: used after destroy()");
    const [B, S] = q.shape as [number, number];
    if (B !== 1) throw new Error(`KVCache: batch must be 1, got ${B}`);
    const past = this.lens[layer]!;
    if (past + S > this.capacity) throw new Error(`KVCache: ${past} cached + ${S} new positions exceed the capacity ${this.capacity}`);
    const { H, Hkv, D, capacity: cap } = this;
    const be = this.be;
    const K = this.k[layer]!;
    const V = this.v[layer]!;
    if (past === 0) {
      const qr = rope(q, theta);
      const kr = rope(k, theta);
      const o = causalAttention(qr, kr, v, scale);
      // [S, Hkv, D] → [Hkv, S, D], one copy per kv head into rows 0..S−1
      const kh = permute(reshape(kr, [S, Hkv, D]), [1, 0, 2]);
      const vh = permute(reshape(v, [S, Hkv, D]), [1, 0, 2]);
      for (let h = 0; h < Hkv; h++) {
        be.copy({ buf: kh.view.buf, off: kh.view.off + h * S * D }, { buf: K, off: h * cap * D }, S * D);
        be.copy({ buf: vh.view.buf, off: vh.view.off + h * S * D }, { buf: V, off: h * cap * D }, S * D);
      }
      this.lens[layer] = S;
      return o;
    }
    if (S !== 1) throw new Error(`KVCache: after the prompt, positions are added one at a time (got ${S})`);
    const R = fromArray(be, ropeMatrix(past, D, theta), [D, D]);
    const qr = matmul(reshape(q, [H, D]), R);
    const kr = matmul(reshape(k, [Hkv, D]), R);
    for (let h = 0; h < Hkv; h++) {
      be.copy({ buf: kr.view.buf, off: kr.view.off + h * D }, { buf: K, off: (h * cap + past) * D }, D);
      be.copy({ buf: v.view.buf, off: v.view.off + h * D }, { buf: V, off: (h * cap + past) * D }, D);
    }
    const P = past + 1;
    const g = H / Hkv;
    const scores = empty(be, [H, P]);
    const probs = empty(be, [H, P]);
    const out = empty(be, [1, 1, H, D]);
    be.matmul(qr.view, { buf: K, off: 0 }, scores.view, { M: g, N: P, K: D, batch: Hkv, transB: true, strideA: g * D, strideB: cap * D, strideOut: g * P });
    // separate input and output buffers (WebGPU does not bind one buffer as both)
    be.affine(scores.view, probs.view, H * P, scale, 0);
    be.softmax(probs.view, scores.view, H, P, false);
    be.matmul(scores.view, { buf: V, off: 0 }, out.view, { M: g, N: D, K: P, batch: Hkv, strideA: g * P, strideB: cap * D, strideOut: g * D });
    this.lens[layer] = P;
    return out;
  }
}
