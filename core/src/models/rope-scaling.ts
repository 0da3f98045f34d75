/**
 * RoPE inverse frequencies with Hugging Face's rope scaling (Transformers `modeling_rope_utils.py`,
 * `ROPE_INIT_FUNCTIONS`), in float64:
 * - default: f_i = θ^(−2i/D), i < D/2;
 * - "linear" (position interpolation, kaiokendev): f_i / factor;
 * - "dynamic" (dynamic NTK, bloc97/emozilla): θ' = θ·((factor·L/L_max) − (factor − 1))^(D/(D−2)) for
 *   a sequence of L > L_max = max_position_embeddings positions; training here never runs past
 *   max_position_embeddings (data.seq_len is bounded by it), where θ' = θ: the default frequencies;
 * - "llama3" (Llama 3.1): with wavelength λ_i = 2π/f_i and the original context C,
 *   λ_i > C/low_freq_factor → f_i/factor; λ_i < C/high_freq_factor → f_i; between, with
 *   s = (C/λ_i − low)/(high − low): (1 − s)·f_i/factor + s·f_i.
 * All of these leave Transformers' attention_factor at 1 (cos and sin unscaled). YaRN and LongRoPE
 * (which scale cos/sin too) are refused by the config (spec-rope.ts).
 */
import type { RopeFreq } from "@zeromoe/kernels";
import type { RopeScalingConfig } from "../config/types.ts";

/** The D/2 inverse frequencies of a rotary embedding of head dim `headDim` (even), base `theta`,
 * scaled by `scaling` (null: unscaled). @throws on an odd head dim. */
export function ropeInverseFrequencies(headDim: number, theta: number, scaling: RopeScalingConfig | null): Float64Array {
  if (headDim % 2 !== 0) throw new Error(`rope: head dim ${headDim} must be even`);
  const half = headDim / 2;
  const f = new Float64Array(half);
  for (let i = 0; i < half; i++) f[i] = 1 / Math.pow(theta, (2 * i) / headDim);
  if (scaling === null) return f;
  if (scaling.rope_type !== "llama3") {
    if (scaling.rope_type === "linear") for (let i = 0; i < half; i++) f[i] = f[i]! / scaling.factor;
    return f; // dynamic: the default frequencies within max_position_embeddings (module comment)
  }
  const { factor, low_freq_factor: low, high_freq_factor: high, original_max_position_embeddings: ctx } = scaling;
  const lowWavelen = ctx / low;
  const highWavelen = ctx / high;
  for (let i = 0; i < half; i++) {
    const wavelen = (2 * Math.PI) / f[i]!;
    if (wavelen > lowWavelen) f[i] = f[i]! / factor;
    else if (wavelen >= highWavelen) {
      const s = (ctx / wavelen - low) / (high - low);
      f[i] = ((1 - s) * f[i]!) / factor + s * f[i]!;
    }
  }
  return f;
}

const TABLES = new WeakMap<object, RopeFreq>();

/** What the rope kernels take for a model config: its rope_theta when unscaled, else the table of
 * {@link ropeInverseFrequencies} (computed once per config object). */
export function ropeFreqOf(cfg: { rope_theta: number; rope_scaling?: RopeScalingConfig | null; head_dim: number }): RopeFreq {
  const sc = cfg.rope_scaling ?? null;
  if (sc === null) return cfg.rope_theta;
  let t = TABLES.get(cfg);
  if (t === undefined) {
    t = ropeInverseFrequencies(cfg.head_dim, cfg.rope_theta, sc);
    TABLES.set(cfg, t);
  }
  return t;
}
