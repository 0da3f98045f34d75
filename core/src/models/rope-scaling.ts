/**
 * RoPE inverse frequencies and attention factors with Hugging Face's rope scaling (Transformers 5
 * `modeling_rope_utils.py`, `ROPE_INIT_FUNCTIONS`), in float64. D is the rotary width (head_dim),
 * θ the base, f_i = θ^(−2i/D) (i < D/2) the default frequencies, L_max = max_position_embeddings:
 * - "linear" (position interpolation, kaiokendev): f_i / factor;
 * - "dynamic" (dynamic NTK, bloc97/emozilla): θ' = θ·((factor·L/L_max) − (factor − 1))^(D/(D−2)) for
 *   a sequence of L > L_max positions; training here never runs past max_position_embeddings
 *   (data.seq_len is bounded by it), where θ' = θ: the default frequencies;
 * - "llama3" (Llama 3.1): with wavelength λ_i = 2π/f_i and the original context C,
 *   λ_i > C/low_freq_factor → f_i/factor; λ_i < C/high_freq_factor → f_i; between, with
 *   s = (C/λ_i − low)/(high − low): (1 − s)·f_i/factor + s·f_i;
 * - "yarn" (Peng et al. 2023, `_compute_yarn_parameters`): with C = original_max_position_embeddings
 *   (default L_max), d(r) = D·ln(C/(2πr)) / (2 ln θ), low = max(⌊d(beta_fast)⌋, 0),
 *   high = min(⌈d(beta_slow)⌉, D − 1) (no rounding when truncate is false; beta_fast 32 and
 *   beta_slow 1 when absent or 0), ramp_i = clamp((i − low)/(high − low), 0, 1) (high += 0.001 when
 *   equal): f'_i = (f_i/factor)·ramp_i + f_i·(1 − ramp_i). Attention factor: attention_factor, else
 *   m(factor, mscale)/m(factor, mscale_all_dim) when both are non-zero, else m(factor, 1), with
 *   m(s, k) = 1 for s ≤ 1, else 0.1·k·ln s + 1;
 * - "longrope" (Phi-3, `_compute_longrope_parameters`): f'_i = f_i / e_i with e = long_factor for a
 *   forward over more than C = original_max_position_embeddings positions (Transformers' dynamic
 *   update: max position id + 1 > C), else short_factor. Attention factor: attention_factor, else
 *   with factor (default L_max/C) ≤ 1 → 1, else √(1 + ln factor / ln C).
 * The attention factor multiplies cos and sin (Transformers' `attention_scaling`), so the rotated
 * q and k each carry it: {@link ropeAttentionFactor}; callers fold its square into the softmax
 * scale when the whole head is rotated, and scale the rotated part otherwise (MLA). DeepSeek's
 * extra softmax factor is {@link deepseekSoftmaxMscale}.
 */
import type { RopeFreq } from "@zeromoe/kernels";
import type { RopeScalingConfig } from "../config/types.ts";

/** What the yarn and longrope formulas read of the model besides the scaling. */
export interface RopeModelContext {
  /** The model's max_position_embeddings (L_max). */
  max_position_embeddings: number;
  /** Positions the forward covers (max position id + 1); longrope picks its factors by it. */
  positions?: number;
}

/** YaRN's and DeepSeek's m(s, k) (module comment). */
function yarnMscale(scale: number, k = 1): number {
  return scale <= 1 ? 1 : 0.1 * k * Math.log(scale) + 1;
}

/** The D/2 inverse frequencies of a rotary embedding of head dim `headDim` (even), base `theta`,
 * scaled by `scaling` (null: unscaled); yarn and longrope need `model`.
 * @throws on an odd head dim, a yarn/longrope scaling without `model`, or LongRoPE factor lists
 *   whose length is not headDim/2. */
export function ropeInverseFrequencies(headDim: number, theta: number, scaling: RopeScalingConfig | null, model?: RopeModelContext): Float64Array {
  if (headDim % 2 !== 0) throw new Error(`rope: head dim ${headDim} must be even`);
  const half = headDim / 2;
  const f = new Float64Array(half);
  for (let i = 0; i < half; i++) f[i] = 1 / Math.pow(theta, (2 * i) / headDim);
  if (scaling === null) return f;
  switch (scaling.rope_type) {
    case "linear":
      for (let i = 0; i < half; i++) f[i] = f[i]! / scaling.factor;
      return f;
    case "dynamic":
      return f; // the default frequencies within max_position_embeddings (module comment)
    case "llama3": {
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
    case "yarn": {
      if (!model) throw new Error("rope: yarn needs the model's max_position_embeddings");
      const ctx = scaling.original_max_position_embeddings ?? model.max_position_embeddings;
      const betaFast = scaling.beta_fast || 32;
      const betaSlow = scaling.beta_slow || 1;
      const dimOf = (rotations: number) => (headDim * Math.log(ctx / (rotations * 2 * Math.PI))) / (2 * Math.log(theta));
      let low = dimOf(betaFast);
      let high = dimOf(betaSlow);
      if (scaling.truncate ?? true) {
        low = Math.floor(low);
        high = Math.ceil(high);
      }
      low = Math.max(low, 0);
      high = Math.min(high, headDim - 1);
      if (low === high) high += 0.001;
      for (let i = 0; i < half; i++) {
        const ramp = Math.min(1, Math.max(0, (i - low) / (high - low)));
        f[i] = (f[i]! / scaling.factor) * ramp + f[i]! * (1 - ramp);
      }
      return f;
    }
    case "longrope": {
      if (!model) throw new Error("rope: longrope needs the model's max_position_embeddings");
      const ctx = scaling.original_max_position_embeddings ?? model.max_position_embeddings;
      const ext = (model.positions ?? 0) > ctx ? scaling.long_factor : scaling.short_factor;
      if (ext.length !== half) throw new Error(`rope: longrope has ${ext.length} factors, head dim ${headDim} needs ${half}`);
      for (let i = 0; i < half; i++) f[i] = f[i]! / ext[i]!;
      return f;
    }
  }
}

/** Transformers' `attention_scaling` of a rope config: the factor on cos and sin (1 but for yarn
 * and longrope; module comment). */
export function ropeAttentionFactor(cfg: { rope_scaling?: RopeScalingConfig | null; max_position_embeddings: number }): number {
  const sc = cfg.rope_scaling ?? null;
  if (sc === null) return 1;
  if (sc.rope_type === "yarn") {
    if (sc.attention_factor !== undefined) return sc.attention_factor;
    if (sc.mscale && sc.mscale_all_dim) return yarnMscale(sc.factor, sc.mscale) / yarnMscale(sc.factor, sc.mscale_all_dim);
    return yarnMscale(sc.factor);
  }
  if (sc.rope_type === "longrope") {
    if (sc.attention_factor !== undefined) return sc.attention_factor;
    const ctx = sc.original_max_position_embeddings ?? cfg.max_position_embeddings;
    const factor = sc.factor ?? cfg.max_position_embeddings / ctx;
    return factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(ctx));
  }
  return 1;
}

/** DeepSeek's softmax factor (Transformers' DeepseekV2/V3Attention): with a rope scaling whose
 * mscale_all_dim is non-zero, the scores' scale is multiplied by m(factor, mscale_all_dim)²;
 * returns that m (1 otherwise). */
export function deepseekSoftmaxMscale(cfg: { rope_scaling?: RopeScalingConfig | null }): number {
  const sc = cfg.rope_scaling ?? null;
  if (sc === null || sc.rope_type !== "yarn" || !sc.mscale_all_dim) return 1;
  return yarnMscale(sc.factor, sc.mscale_all_dim);
}

const TABLES = new WeakMap<object, { short: RopeFreq; long?: RopeFreq }>();

/** What the rope kernels take for a model config: its rope_theta when unscaled, else the table of
 * {@link ropeInverseFrequencies} (computed once per config object; longrope keeps one table for
 * forwards within the original context and one past it, chosen by `positions`, the forward's
 * max position id + 1). */
export function ropeFreqOf(cfg: { rope_theta: number; rope_scaling?: RopeScalingConfig | null; head_dim: number; max_position_embeddings: number }, positions = 0): RopeFreq {
  const sc = cfg.rope_scaling ?? null;
  if (sc === null) return cfg.rope_theta;
  let t = TABLES.get(cfg);
  if (t === undefined) {
    t = { short: ropeInverseFrequencies(cfg.head_dim, cfg.rope_theta, sc, { max_position_embeddings: cfg.max_position_embeddings }) };
    TABLES.set(cfg, t);
  }
  if (sc.rope_type !== "longrope" || positions <= (sc.original_max_position_embeddings ?? cfg.max_position_embeddings)) return t.short;
  t.long ??= ropeInverseFrequencies(cfg.head_dim, cfg.rope_theta, sc, { max_position_embeddings: cfg.max_position_embeddings, positions });
  return t.long;
}
