/**
 * Schema of the `model` section: a Hugging Face `config.json` for `llama` (LlamaConfig),
 * `mixtral` (MixtralConfig) or `qwen3_moe` (Qwen3MoeConfig), with transformers' defaults for every
 * key left out. Sources: transformers `models/llama/configuration_llama.py`,
 * `models/mixtral/configuration_mixtral.py`, `models/qwen3_moe/configuration_qwen3_moe.py` (5.17).
 * HF keys that do not change training here (`architectures`, `torch_dtype`, `use_cache` …) are
 * accepted and ignored with a warning, so a real HF config can be pasted in. Options the models do
 * not implement (scaled RoPE, biases, router jitter, sliding window) are refused naming the key.
 * Cross-field checks (head divisibility, top-k ≤ experts) are in {@link checkModelConsistency}.
 * This is the only parser of HF model configs: the job's `model` section and a bare `config.json`
 * ({@link resolveModelConfig} in resolve-model.ts) both go through it.
 */
import { addIssue, check, isPlainObject, joinPath, show, typeOfJson, type CheckContext, type ObjectSpec, type Spec, type Unsupported } from "./schema.ts";
import { absentOnly, oneOf } from "./spec-deepspeed-other.ts";
import type { DeepseekV2Config, DeepseekV3Config, ModelConfig, RopeScalingConfig } from "./types.ts";
import { readRopeSection } from "./spec-rope.ts";
import { moeLayerIndices } from "./moe-shape.ts";

/**
 * Upper bounds of the model's numeric keys: what the engine can use, so a hostile or mistyped
 * config.json (`initializer_range` 1e63, `hidden_size` 1e15) is refused naming the key before any
 * arithmetic or allocation reaches it.
 * - sizes and counts: the kernels index tensors with 32-bit integers and token ids are int32, so a
 *   size (or id) is at most 2^31 − 1;
 * - max_position_embeddings: RoPE turns positions into angles in f32, exact for integers up to 2^24;
 * - initializer_range: the normal init's std range (Backend.randomFill: [2^-100, 2^100]);
 * - other reals (ε, RoPE base, loss weights, scaling factors): finite f32 values (≤ 3.4e38).
 */
export const MODEL_BOUNDS = { size: 2 ** 31 - 1, positions: 2 ** 24, initStdMin: 2 ** -100, initStdMax: 2 ** 100, f32Max: 3.4028234663852886e38 } as const;

const posInt = (doc: string, def?: number): Spec => ({ kind: "number", int: true, min: 1, max: MODEL_BOUNDS.size, default: def, doc });
const optTokenId = (doc: string, def: number | null): Spec => ({ kind: "number", int: true, min: 0, max: MODEL_BOUNDS.size, nullable: true, default: def, doc });
/** A positive finite f32 real. */
const posReal = (doc: string, def: number): Spec => ({ kind: "number", min: 0, exclusiveMin: true, max: MODEL_BOUNDS.f32Max, default: def, doc });
/** A non-negative finite f32 real. */
const nonNegReal = (doc: string, def: number): Spec => ({ kind: "number", min: 0, max: MODEL_BOUNDS.f32Max, default: def, doc });

/** HF keys accepted from a pasted config.json and ignored (reason shown as a warning). */
const HF_IGNORED: Readonly<Record<string, string>> = {
  architectures: "the class follows model_type",
  torch_dtype: "precision comes from fp16/bf16",
  dtype: "precision comes from fp16/bf16",
  transformers_version: "informational",
  _name_or_path: "informational",
  use_cache: "no KV cache in training",
  pretraining_tp: "no tensor parallelism",
  output_attentions: "not supported",
  output_hidden_states: "not supported",
  return_dict: "not applicable",
  auto_map: "not applicable",
};

/** HF keys every family refuses unless absent or null, with what to do instead. */
const HF_UNSUPPORTED: Readonly<Record<string, Unsupported>> = {
  quantization_config: absentOnly(
    "this is a quantized checkpoint (FP8, GPTQ, AWQ, bitsandbytes, ...), and ZeroMoE trains full-precision weights only: use the model's dequantized weights (its BF16/FP16 release, or the checkpoint converted to bf16 with its own dequantization script), whose config.json has no quantization_config",
  ),
};

/** Keys of DeepSeek's own remote-code configs (configuration_deepseek.py of the Hub repositories)
 * that Transformers' DeepseekV2/V3 classes do not read, and what they mean here. */
const DEEPSEEK_REMOTE_CODE_IGNORED: Readonly<Record<string, string>> = {
  ep_size: "DeepSeek's remote-code expert-parallel size; here expert parallelism is moe.ep_size or expert_parallel.autoep_size",
  aux_loss_alpha: "Transformers' DeepSeek adds no auxiliary loss; the moe section's aux_loss and aux_loss_coef choose one",
  seq_aux: "Transformers' DeepSeek adds no auxiliary loss; the moe section's aux_loss chooses one",
};

/** DeepSeek-V3's remote-code routing keys: the values Transformers' DeepseekV3 implements (sigmoid
 * scores, group-limited top-k with e_score_correction_bias: "noaux_tc"), every layer past
 * first_k_dense_replace a MoE layer. */
const DEEPSEEK_REMOTE_CODE_V3: Readonly<Record<string, Unsupported>> = {
  topk_method: oneOf(["noaux_tc"], 'DeepseekV3 routes by sigmoid scores plus e_score_correction_bias within the topk_group best groups ("noaux_tc"), as Transformers\' DeepseekV3TopkRouter; other methods are not implemented for it'),
  scoring_func: oneOf(["sigmoid"], "DeepseekV3's router scores are sigmoids (Transformers' DeepseekV3TopkRouter); softmax scoring is DeepSeek-V2's"),
  moe_layer_freq: oneOf([1], "every layer from first_k_dense_replace on is a MoE layer (Transformers' DeepSeek); other frequencies are not implemented"),
};

/** DeepSeek-V2's remote-code routing keys at the values Transformers' DeepseekV2 implements. */
const DEEPSEEK_REMOTE_CODE_V2: Readonly<Record<string, Unsupported>> = {
  scoring_func: oneOf(["softmax"], "DeepseekV2's router scores are a softmax (Transformers' DeepseekV2Moe); sigmoid scoring is DeepSeek-V3's"),
  moe_layer_freq: oneOf([1], "every layer from first_k_dense_replace on is a MoE layer (Transformers' DeepSeek); other frequencies are not implemented"),
};

/** A key that must be null (a feature this engine does not have): a non-null value is an error naming it. */
function mustBeNull(what: string, doc = `${what} (only null is supported)`): Spec {
  return {
    kind: "custom",
    typeName: "null",
    nullable: true,
    default: null,
    doc,
    check(value: unknown, path: string, ctx: CheckContext): unknown {
      addIssue(ctx, path, `${what} is not supported; expected null, got ${show(value)}`);
      return undefined;
    },
  };
}

/** A boolean/number key whose only supported value is `allowed` (HF's default; the models have no
 * other code path): a value of the wrong type, or another value, is an error naming `what`. */
function onlyValue(allowed: boolean | number, what: string, doc: string): Spec {
  const typeName = `${typeof allowed} (only ${JSON.stringify(allowed)})`;
  return {
    kind: "custom",
    typeName,
    default: allowed,
    doc,
    check(value: unknown, path: string, ctx: CheckContext): unknown {
      if (typeof value !== typeof allowed) {
        addIssue(ctx, path, `expected ${typeName}, got ${typeOfJson(value)} ${show(value)}`);
        return undefined;
      }
      if (value !== allowed) {
        addIssue(ctx, path, `${what} is not supported; expected ${JSON.stringify(allowed)}, got ${show(value)}`);
        return undefined;
      }
      return value;
    },
  };
}

/** Fields common to LlamaConfig and MixtralConfig; defaults differ per type and are patched below. */
function commonFields(d: {
  intermediate_size: number;
  num_key_value_heads: number | null;
  max_position_embeddings: number;
  rms_norm_eps: number;
  rope_theta: number;
}): Record<string, Spec> {
  return {
    vocab_size: posInt("token vocabulary size (>= the tokenizer's)", 32000),
    hidden_size: posInt("model width", 4096),
    intermediate_size: posInt("SwiGLU MLP (or each expert's) hidden width", d.intermediate_size),
    num_hidden_layers: posInt("transformer blocks", 32),
    num_attention_heads: posInt("query heads", 32),
    num_key_value_heads: { kind: "number", int: true, min: 1, max: MODEL_BOUNDS.size, nullable: true, default: d.num_key_value_heads, doc: "key/value heads (grouped-query attention); null = num_attention_heads" },
    head_dim: { kind: "number", int: true, min: 2, max: MODEL_BOUNDS.size, nullable: true, default: null, doc: "per-head size; null = hidden_size / num_attention_heads" },
    hidden_act: { kind: "enum", values: ["silu"], default: "silu", doc: "MLP activation (SwiGLU with silu)" },
    rms_norm_eps: posReal("RMSNorm ε", d.rms_norm_eps),
    rope_theta: posReal("RoPE base", d.rope_theta),
    rope_scaling: {
      kind: "custom",
      typeName: "object {rope_type (or type), factor, ...} or null",
      nullable: true,
      doc: 'Transformers 4 RoPE scaling: rope_type "linear" or "dynamic" (factor), "llama3" (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings), "yarn" (factor; original_max_position_embeddings, attention_factor, beta_fast, beta_slow, mscale, mscale_all_dim, truncate) or "longrope" (short_factor, long_factor; factor, attention_factor, original_max_position_embeddings) (spec-rope.ts)',
      check: (value: unknown, path: string, ctx: CheckContext): unknown => readRopeSection(value, path, ctx, "rope_scaling"),
    },
    rope_parameters: {
      kind: "custom",
      typeName: "object {rope_type, rope_theta, ...} or null",
      nullable: true,
      doc: "Transformers 5 form of the RoPE settings: rope_type (\"default\" or a scaling as rope_scaling), rope_theta (sets rope_theta) and the scaling's keys",
      check: (value: unknown, path: string, ctx: CheckContext): unknown => readRopeSection(value, path, ctx, "rope_parameters"),
    },
    max_position_embeddings: { kind: "number", int: true, min: 1, max: MODEL_BOUNDS.positions, default: d.max_position_embeddings, doc: "longest sequence the model is built for (>= data.seq_len; at most 2^24: RoPE angles are f32)" },
    tie_word_embeddings: { kind: "boolean", default: false, doc: "share the embedding matrix with the LM head" },
    initializer_range: { kind: "number", min: MODEL_BOUNDS.initStdMin, max: MODEL_BOUNDS.initStdMax, default: 0.02, doc: "std-dev of the normal weight init (2^-100 to 2^100: the normal draw's range)" },
    attention_bias: onlyValue(false, "a bias in the q/k/v/o projections (attention_bias true)", "bias in q/k/v/o projections (only false is supported)"),
    attention_dropout: { kind: "number", min: 0, max: 0, default: 0, doc: "attention dropout (only 0 is supported)" },
    bos_token_id: optTokenId("beginning-of-sequence id", 1),
    eos_token_id: optTokenId("end-of-sequence id", 2),
    pad_token_id: optTokenId("padding id", null),
  };
}

/** LlamaConfig (transformers defaults). */
export const LLAMA_SPEC: ObjectSpec = {
  kind: "object",
  doc: "Hugging Face LlamaConfig",
  fields: {
    model_type: { kind: "enum", values: ["llama"], required: true, doc: "selects the architecture" },
    ...commonFields({ intermediate_size: 11008, num_key_value_heads: null, max_position_embeddings: 2048, rms_norm_eps: 1e-6, rope_theta: 10000 }),
    mlp_bias: onlyValue(false, "a bias in the MLP projections (mlp_bias true)", "bias in the MLP projections (only false is supported)"),
  },
  ignored: HF_IGNORED,
  unsupported: HF_UNSUPPORTED,
};

/** MixtralConfig (transformers defaults). */
export const MIXTRAL_SPEC: ObjectSpec = {
  kind: "object",
  doc: "Hugging Face MixtralConfig",
  fields: {
    model_type: { kind: "enum", values: ["mixtral"], required: true, doc: "selects the architecture" },
    ...commonFields({ intermediate_size: 14336, num_key_value_heads: 8, max_position_embeddings: 4096 * 32, rms_norm_eps: 1e-5, rope_theta: 1e6 }),
    num_local_experts: posInt("experts per MoE layer", 8),
    num_experts_per_tok: posInt("experts each token is routed to (top-k)", 2),
    router_aux_loss_coef: nonNegReal("weight of the load-balancing loss", 0.001),
    output_router_logits: { kind: "boolean", default: false, doc: "return router logits (and add the aux loss) in forward" },
    router_jitter_noise: onlyValue(0, "router jitter noise", "multiplicative jitter on router inputs in training (only 0 is supported)"),
    sliding_window: mustBeNull("sliding-window attention", "sliding-window attention width (only null = full causal attention is supported)"),
  },
  ignored: HF_IGNORED,
  unsupported: HF_UNSUPPORTED,
};

/** Qwen3MoeConfig (transformers 5 defaults; `configuration_qwen3_moe.py`). Transformers 5 writes
 * the expert count as `num_local_experts`; older configs' `num_experts` is its alias. */
export const QWEN3_MOE_SPEC: ObjectSpec = {
  kind: "object",
  doc: "Hugging Face Qwen3MoeConfig",
  fields: {
    model_type: { kind: "enum", values: ["qwen3_moe"], required: true, doc: "selects the architecture" },
    ...commonFields({ intermediate_size: 6144, num_key_value_heads: 4, max_position_embeddings: 32768, rms_norm_eps: 1e-6, rope_theta: 10000 }),
    num_local_experts: posInt("experts per MoE layer (older configs: num_experts)", 128),
    num_experts_per_tok: posInt("experts each token is routed to (top-k)", 8),
    moe_intermediate_size: posInt("each expert's SwiGLU hidden width", 768),
    norm_topk_prob: { kind: "boolean", default: false, doc: "renormalise the top-k router probabilities to sum 1" },
    decoder_sparse_step: posInt("layer l has experts when (l + 1) % decoder_sparse_step == 0 (and l is not in mlp_only_layers)", 1),
    mlp_only_layers: { kind: "array", items: { kind: "number", int: true, min: 0, max: MODEL_BOUNDS.size }, default: [], doc: "layers with a dense MLP (intermediate_size) instead of experts" },
    router_aux_loss_coef: nonNegReal("weight of the load-balancing loss", 0.001),
    output_router_logits: { kind: "boolean", default: false, doc: "return router logits (and add the aux loss) in forward" },
    use_sliding_window: onlyValue(false, "sliding-window attention (use_sliding_window true)", "sliding-window attention (only false is supported)"),
    sliding_window: { kind: "number", int: true, min: 0, max: MODEL_BOUNDS.size, nullable: true, default: null, doc: "window size; unused while use_sliding_window is false" },
  },
  aliases: { num_experts: "num_local_experts" },
  ignored: { ...HF_IGNORED, max_window_layers: "used only with sliding-window attention", layer_types: "every layer is full attention here" },
  unsupported: HF_UNSUPPORTED,
};

/** Qwen2MoeConfig (transformers 5 defaults; `configuration_qwen2_moe.py`); its config.json writes
 * the expert count as `num_experts` (alias of `num_local_experts`). */
export const QWEN2_MOE_SPEC: ObjectSpec = {
  kind: "object",
  doc: "Hugging Face Qwen2MoeConfig",
  fields: {
    model_type: { kind: "enum", values: ["qwen2_moe"], required: true, doc: "selects the architecture" },
    ...commonFields({ intermediate_size: 5632, num_key_value_heads: 16, max_position_embeddings: 32768, rms_norm_eps: 1e-6, rope_theta: 10000 }),
    num_local_experts: posInt("routed experts per MoE layer (config.json: num_experts)", 60),
    num_experts_per_tok: posInt("experts each token is routed to (top-k)", 4),
    moe_intermediate_size: posInt("each routed expert's SwiGLU hidden width", 1408),
    shared_expert_intermediate_size: posInt("the shared expert's SwiGLU hidden width", 5632),
    norm_topk_prob: { kind: "boolean", default: false, doc: "renormalise the top-k router probabilities to sum 1" },
    qkv_bias: { kind: "boolean", default: true, doc: "biases on the q/k/v projections (o_proj has none)" },
    decoder_sparse_step: posInt("layer l has experts when (l + 1) % decoder_sparse_step == 0 (and l is not in mlp_only_layers)", 1),
    mlp_only_layers: { kind: "array", items: { kind: "number", int: true, min: 0, max: MODEL_BOUNDS.size }, default: [], doc: "layers with a dense MLP (intermediate_size) instead of experts" },
    router_aux_loss_coef: nonNegReal("weight of the load-balancing loss", 0.001),
    output_router_logits: { kind: "boolean", default: false, doc: "return router logits (and add the aux loss) in forward" },
    use_sliding_window: onlyValue(false, "sliding-window attention (use_sliding_window true)", "sliding-window attention (only false is supported)"),
    sliding_window: { kind: "number", int: true, min: 0, max: MODEL_BOUNDS.size, nullable: true, default: null, doc: "window size; unused while use_sliding_window is false" },
  },
  aliases: { num_experts: "num_local_experts" },
  ignored: { ...HF_IGNORED, max_window_layers: "used only with sliding-window attention", layer_types: "every layer is full attention here" },
  unsupported: HF_UNSUPPORTED,
};

/** Keys DeepseekV2Config and DeepseekV3Config share (module comment of types.ts `DeepseekConfigBase`). */
function deepseekFields(d: { experts: number; topK: number; moeI: number; shared: number | null; firstDense: number; nGroup: number | null; topkGroup: number | null; scale: number }): Record<string, Spec> {
  const optPos = (doc: string, def: number | null): Spec => ({ kind: "number", int: true, min: 1, max: MODEL_BOUNDS.size, nullable: true, default: def, doc });
  return {
    num_local_experts: posInt("routed experts per MoE layer (config.json: n_routed_experts)", d.experts),
    num_experts_per_tok: posInt("routed experts each token uses (top-k)", d.topK),
    moe_intermediate_size: posInt("each routed expert's SwiGLU hidden width", d.moeI),
    n_shared_experts: optPos("shared experts per MoE layer (one SwiGLU of moe_intermediate_size × this); null: none", d.shared),
    first_k_dense_replace: { kind: "number", int: true, min: 0, max: MODEL_BOUNDS.size, default: d.firstDense, doc: "layers below this index have a dense MLP of intermediate_size" },
    n_group: optPos("expert groups for group-limited routing (null: none)", d.nGroup),
    topk_group: optPos("groups a token may route to (with n_group)", d.topkGroup),
    routed_scaling_factor: posReal("factor on the routed experts' combine weights", d.scale),
    q_lora_rank: optPos("rank of the low-rank query projection q_a_proj → q_a_layernorm → q_b_proj (null: a full q_proj)", 1536),
    kv_lora_rank: posInt("rank of the compressed key/value projection kv_a_proj_with_mqa", 512),
    qk_rope_head_dim: posInt("per-head query/key width with RoPE (the shared RoPE key's width)", 64),
    qk_nope_head_dim: posInt("per-head query/key width without RoPE", 128),
    v_head_dim: posInt("per-head value width", 128),
    qk_head_dim: { kind: "number", int: true, min: 1, max: MODEL_BOUNDS.size, nullable: true, default: null, doc: "qk_nope_head_dim + qk_rope_head_dim (derived; a given value must agree)" },
    router_aux_loss_coef: { kind: "number", min: 0, max: MODEL_BOUNDS.f32Max, default: 0.001, doc: "weight of the moe section's DeepSpeed aux loss (aux_loss switch/gshard); Hugging Face's DeepSeek adds none" },
    output_router_logits: onlyValue(false, "a Hugging Face load-balancing loss for DeepSeek (output_router_logits true)", "Hugging Face's DeepSeek computes no load-balancing loss (only false); use the moe section's aux_loss"),
  };
}

/** DeepseekV3Config (transformers 5 defaults; `configuration_deepseek_v3.py`). */
export const DEEPSEEK_V3_SPEC: ObjectSpec = {
  kind: "object",
  doc: "Hugging Face DeepseekV3Config",
  fields: {
    model_type: { kind: "enum", values: ["deepseek_v3"], required: true, doc: "selects the architecture" },
    ...commonFields({ intermediate_size: 18432, num_key_value_heads: 128, max_position_embeddings: 4096, rms_norm_eps: 1e-6, rope_theta: 10000 }),
    ...deepseekFields({ experts: 256, topK: 8, moeI: 2048, shared: 1, firstDense: 3, nGroup: 8, topkGroup: 4, scale: 2.5 }),
    norm_topk_prob: { kind: "boolean", default: true, doc: "renormalise the chosen sigmoid scores to sum 1 (before routed_scaling_factor)" },
    rope_interleave: { kind: "boolean", default: true, doc: "RoPE on interleaved pairs (x[2i], x[2i+1]) of the rope part instead of halves" },
  },
  aliases: { n_routed_experts: "num_local_experts" },
  ignored: { ...HF_IGNORED, ...DEEPSEEK_REMOTE_CODE_IGNORED, num_nextn_predict_layers: "multi-token-prediction layers are not built (Transformers does not build them either)" },
  unsupported: { ...HF_UNSUPPORTED, ...DEEPSEEK_REMOTE_CODE_V3 },
};

/** DeepseekV2Config (transformers 5 defaults; `configuration_deepseek_v2.py`; `num_experts_per_tok`
 * has no default there). */
export const DEEPSEEK_V2_SPEC: ObjectSpec = {
  kind: "object",
  doc: "Hugging Face DeepseekV2Config",
  fields: {
    model_type: { kind: "enum", values: ["deepseek_v2"], required: true, doc: "selects the architecture" },
    ...commonFields({ intermediate_size: 11008, num_key_value_heads: 32, max_position_embeddings: 2048, rms_norm_eps: 1e-6, rope_theta: 10000 }),
    ...deepseekFields({ experts: 64, topK: 6, moeI: 1407, shared: 2, firstDense: 0, nGroup: null, topkGroup: null, scale: 1.0 }),
    num_experts_per_tok: { kind: "number", int: true, min: 1, max: MODEL_BOUNDS.size, required: true, doc: "routed experts each token uses (top-k; no default in DeepseekV2Config)" },
    norm_topk_prob: onlyValue(false, "renormalising DeepSeek-V2's top-k weights (norm_topk_prob true)", "DeepseekV2Moe does not renormalise the top-k weights (only false)"),
    topk_method: { kind: "enum", values: ["greedy", "group_limited_greedy"], default: "greedy", doc: "greedy top-k, or top-k within the topk_group best groups (group score: its best expert)" },
    mlp_bias: onlyValue(false, "a bias in the MLP projections (mlp_bias true)", "bias in the MLP projections (only false is supported)"),
  },
  aliases: { n_routed_experts: "num_local_experts" },
  ignored: { ...HF_IGNORED, ...DEEPSEEK_REMOTE_CODE_IGNORED },
  unsupported: { ...HF_UNSUPPORTED, ...DEEPSEEK_REMOTE_CODE_V2 },
};

/** Per-type specs. */
export const MODEL_SPECS = { llama: LLAMA_SPEC, mixtral: MIXTRAL_SPEC, qwen3_moe: QWEN3_MOE_SPEC, qwen2_moe: QWEN2_MOE_SPEC, deepseek_v3: DEEPSEEK_V3_SPEC, deepseek_v2: DEEPSEEK_V2_SPEC } as const;

/** The `model` section: picks the spec by `model_type`, then fills the HF null defaults
 * (`num_key_value_heads`, `head_dim`). */
export const MODEL_SPEC: Spec = {
  kind: "custom",
  typeName: "object (Hugging Face config; keys by model_type)",
  required: true,
  doc: "Hugging Face model config",
  variants: { llama: LLAMA_SPEC, mixtral: MIXTRAL_SPEC, qwen3_moe: QWEN3_MOE_SPEC, qwen2_moe: QWEN2_MOE_SPEC, deepseek_v3: DEEPSEEK_V3_SPEC, deepseek_v2: DEEPSEEK_V2_SPEC },
  check(value: unknown, path: string, ctx: CheckContext): unknown {
    if (!isPlainObject(value)) {
      addIssue(ctx, path, `expected a Hugging Face config object with model_type ${Object.keys(MODEL_SPECS).map((t) => `"${t}"`).join(", ")}, got ${typeOfJson(value)} ${show(value)}`);
      return undefined;
    }
    const typeSpec: Spec = { kind: "enum", values: Object.keys(MODEL_SPECS), required: true };
    const type = check(value.model_type, typeSpec, joinPath(path, "model_type"), ctx) as keyof typeof MODEL_SPECS | undefined;
    if (type === undefined) return undefined;
    // a key of another family only: named, with the families that have it
    const own = MODEL_SPECS[type];
    const known = (spec: ObjectSpec, k: string): boolean => k in spec.fields || k in (spec.aliases ?? {}) || k in (spec.ignored ?? {}) || k in (spec.unsupported ?? {});
    for (const k of Object.keys(value)) {
      if (known(own, k)) continue;
      const others = Object.entries(MODEL_SPECS).filter(([t, spec]) => t !== type && known(spec, k)).map(([t]) => `"${t}"`);
      if (others.length > 0) addIssue(ctx, joinPath(path, k), `only for model_type ${others.join(" or ")} (this model is "${type}")`);
    }
    const filtered = Object.fromEntries(Object.entries(value).filter(([k]) => known(own, k) || !Object.values(MODEL_SPECS).some((spec) => known(spec, k))));
    // `from_pretrained` (a Hub directory, made absolute by applyHubModel) rides along unchecked
    const fromPretrained = filtered.from_pretrained;
    delete filtered.from_pretrained;
    if (fromPretrained !== undefined && typeof fromPretrained !== "string") addIssue(ctx, joinPath(path, "from_pretrained"), `expected a directory path (string), got ${show(fromPretrained)}`);
    const out = check(filtered, own, path, ctx) as Record<string, unknown> | undefined;
    if (out !== undefined && typeof fromPretrained === "string") out.from_pretrained = fromPretrained;
    if (out === undefined) return undefined;
    if (out.num_key_value_heads === null && typeof out.num_attention_heads === "number") out.num_key_value_heads = out.num_attention_heads;
    // DeepSeek: head_dim is the RoPE width (Transformers sets it to qk_rope_head_dim)
    if (out.head_dim === null && (type === "deepseek_v3" || type === "deepseek_v2") && typeof out.qk_rope_head_dim === "number") out.head_dim = out.qk_rope_head_dim;
    if (out.head_dim === null && typeof out.hidden_size === "number" && typeof out.num_attention_heads === "number") {
      if (out.hidden_size % out.num_attention_heads !== 0) {
        addIssue(ctx, joinPath(path, "hidden_size"), `hidden_size ${out.hidden_size} is not divisible by num_attention_heads ${out.num_attention_heads}; set head_dim explicitly or change them`);
      } else {
        out.head_dim = out.hidden_size / out.num_attention_heads;
      }
    }
    // rope_scaling (Transformers 4) and rope_parameters (5) → rope_theta and one rope_scaling (spec-rope.ts)
    type Section = { scaling: RopeScalingConfig | null; theta?: number } | null | undefined;
    const rs = out.rope_scaling as Section;
    const rp = out.rope_parameters as Section;
    if (rp && rp.theta !== undefined) {
      if (value.rope_theta !== undefined && value.rope_theta !== rp.theta) {
        addIssue(ctx, joinPath(path, "rope_parameters.rope_theta"), `rope_parameters.rope_theta ${rp.theta} differs from rope_theta ${show(value.rope_theta)}; give one`);
      }
      out.rope_theta = rp.theta;
    }
    let scaling = rs?.scaling ?? null;
    if (rp?.scaling) {
      if (scaling !== null && JSON.stringify(scaling) !== JSON.stringify(rp.scaling)) addIssue(ctx, joinPath(path, "rope_parameters"), `rope_parameters and rope_scaling describe different RoPE scalings; give one`);
      scaling = rp.scaling;
    }
    out.rope_scaling = scaling;
    delete out.rope_parameters;
    return out;
  },
};

/** Cross-field checks on a resolved model: GQA divisibility, even head_dim (RoPE pairs),
 * top-k ≤ experts. Records issues under `path`. */
export function checkModelConsistency(m: ModelConfig, path: string, ctx: CheckContext): void {
  if (m.num_attention_heads % m.num_key_value_heads !== 0) {
    addIssue(ctx, joinPath(path, "num_key_value_heads"), `num_attention_heads ${m.num_attention_heads} must be a multiple of num_key_value_heads ${m.num_key_value_heads}`);
  }
  if (m.head_dim % 2 !== 0) addIssue(ctx, joinPath(path, "head_dim"), `head_dim must be even for rotary embeddings, got ${m.head_dim}`);
  const rs = m.rope_scaling;
  if (rs && rs.rope_type === "longrope") {
    // one factor per rotary frequency (Transformers' _validate_longrope_parameters: dim // 2)
    for (const k of ["short_factor", "long_factor"] as const) {
      if (rs[k].length !== m.head_dim / 2) addIssue(ctx, joinPath(path, `rope_scaling.${k}`), `expected ${m.head_dim / 2} factors (head_dim ${m.head_dim} / 2), got ${rs[k].length}`);
    }
  }
  if (m.model_type !== "llama" && m.num_experts_per_tok > m.num_local_experts) {
    addIssue(ctx, joinPath(path, "num_experts_per_tok"), `num_experts_per_tok ${m.num_experts_per_tok} exceeds num_local_experts ${m.num_local_experts}`);
  }
  if (m.model_type !== "llama" && m.num_experts_per_tok > 8) {
    addIssue(ctx, joinPath(path, "num_experts_per_tok"), `at most 8 experts per token are supported (Backend.topk k <= 8), got ${m.num_experts_per_tok}`);
  }
  if (m.model_type === "deepseek_v3" || m.model_type === "deepseek_v2") checkDeepseek(m, path, ctx);
  if (m.model_type === "qwen3_moe" || m.model_type === "qwen2_moe") {
    m.mlp_only_layers.forEach((l, i) => {
      if (l >= m.num_hidden_layers) addIssue(ctx, joinPath(path, `mlp_only_layers[${i}]`), `layer ${l} does not exist (num_hidden_layers ${m.num_hidden_layers})`);
    });
    if (moeLayerIndices(m).length === 0) addIssue(ctx, joinPath(path, "mlp_only_layers"), `no layer has experts (decoder_sparse_step ${m.decoder_sparse_step}, mlp_only_layers [${m.mlp_only_layers.join(", ")}]); use model_type "llama" for a dense model`);
  }
}

/** DeepSeek's cross-field rules: head_dim = qk_rope_head_dim (even), qk_head_dim = nope + rope,
 * num_key_value_heads = num_attention_heads (MLA keys and values have every head), groups that
 * divide the experts, at least one MoE layer. */
function checkDeepseek(m: DeepseekV3Config | DeepseekV2Config, path: string, ctx: CheckContext): void {
  const at = (k: string) => joinPath(path, k);
  if (m.head_dim !== m.qk_rope_head_dim) addIssue(ctx, at("head_dim"), `head_dim ${m.head_dim} must equal qk_rope_head_dim ${m.qk_rope_head_dim} (DeepSeek's RoPE width)`);
  const qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
  if (m.qk_head_dim !== null && m.qk_head_dim !== qk) addIssue(ctx, at("qk_head_dim"), `qk_head_dim ${m.qk_head_dim} must equal qk_nope_head_dim + qk_rope_head_dim = ${qk}`);
  if (m.num_key_value_heads !== m.num_attention_heads) addIssue(ctx, at("num_key_value_heads"), `multi-head latent attention has keys and values for every head: num_key_value_heads ${m.num_key_value_heads} must equal num_attention_heads ${m.num_attention_heads}`);
  if (m.first_k_dense_replace >= m.num_hidden_layers) addIssue(ctx, at("first_k_dense_replace"), `first_k_dense_replace ${m.first_k_dense_replace} leaves no MoE layer (num_hidden_layers ${m.num_hidden_layers}); use model_type "llama" for a dense model`);
  const grouped = m.model_type === "deepseek_v3" || m.topk_method === "group_limited_greedy";
  if (grouped) {
    if (m.n_group === null || m.topk_group === null) addIssue(ctx, at("n_group"), `${m.model_type === "deepseek_v3" ? "deepseek_v3" : "topk_method \"group_limited_greedy\""} needs n_group and topk_group (got ${m.n_group}, ${m.topk_group})`);
    else {
      if (m.num_local_experts % m.n_group !== 0) addIssue(ctx, at("n_group"), `num_local_experts ${m.num_local_experts} is not divisible by n_group ${m.n_group}`);
      if (m.topk_group > m.n_group) addIssue(ctx, at("topk_group"), `topk_group ${m.topk_group} exceeds n_group ${m.n_group}`);
      if (m.model_type === "deepseek_v3" && m.num_local_experts / m.n_group < 2) addIssue(ctx, at("n_group"), `deepseek_v3 scores a group by its two best experts: n_group ${m.n_group} leaves ${m.num_local_experts / m.n_group} per group`);
    }
  }
}
