/**
 * Hugging Face model configs (`config.json`) for Llama and Mixtral, with HF's key names and
 * defaults (transformers `LlamaConfig`, `MixtralConfig`). Transformers 5 moved `rope_theta` into
 * `rope_parameters: {rope_type, rope_theta}`; both spellings are read. Only the default RoPE type is
 * supported (scaled variants are refused with an error naming the key).
 */

/** Fields shared by Llama and Mixtral configs (HF names). */
export interface DecoderConfig {
  model_type: string;
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  /** Grouped-query attention: kv heads (default = num_attention_heads). */
  num_key_value_heads: number;
  /** Per-head dim (default hidden_size / num_attention_heads). */
  head_dim: number;
  hidden_act: string;
  max_position_embeddings: number;
  initializer_range: number;
  rms_norm_eps: number;
  rope_theta: number;
  tie_word_embeddings: boolean;
  attention_bias: boolean;
  mlp_bias: boolean;
}

/** Llama (`LlamaForCausalLM`). */
export interface LlamaConfig extends DecoderConfig {
  model_type: "llama";
}

/** Mixtral (`MixtralForCausalLM`): Llama + sparse MoE feed-forward in every layer. */
export interface MixtralConfig extends DecoderConfig {
  model_type: "mixtral";
  num_local_experts: number;
  num_experts_per_tok: number;
  /** Weight of the load-balancing loss in the total loss. */
  router_aux_loss_coef: number;
  /** HF adds `router_aux_loss_coef · aux_loss` to the loss only when this is true (HF default false). */
  output_router_logits: boolean;
  router_jitter_noise: number;
  sliding_window: number | null;
}

/** HF defaults of `LlamaConfig` (transformers). */
export const LLAMA_DEFAULTS = {
  vocab_size: 32000,
  hidden_size: 4096,
  intermediate_size: 11008,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  hidden_act: "silu",
  max_position_embeddings: 2048,
  initializer_range: 0.02,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  tie_word_embeddings: false,
  attention_bias: false,
  mlp_bias: false,
} as const;

/** HF defaults of `MixtralConfig` (transformers). */
export const MIXTRAL_DEFAULTS = {
  vocab_size: 32000,
  hidden_size: 4096,
  intermediate_size: 14336,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  hidden_act: "silu",
  max_position_embeddings: 4096 * 32,
  initializer_range: 0.02,
  rms_norm_eps: 1e-5,
  rope_theta: 1e6,
  tie_word_embeddings: false,
  attention_bias: false,
  mlp_bias: false,
  num_local_experts: 8,
  num_experts_per_tok: 2,
  router_aux_loss_coef: 0.001,
  output_router_logits: false,
  router_jitter_noise: 0,
  sliding_window: null,
} as const;

type Json = Record<string, unknown>;

function int(j: Json, key: string, def: number | undefined, where: string, min = 1): number {
  const v = j[key] ?? def;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min) throw new Error(`${where}.${key}: expected an integer ≥ ${min}, got ${JSON.stringify(j[key])}`);
  return v;
}

function num(j: Json, key: string, def: number | undefined, where: string): number {
  const v = j[key] ?? def;
  if (typeof v !== "number" || !Number.isFinite(v)) throw new Error(`${where}.${key}: expected a number, got ${JSON.stringify(j[key])}`);
  return v;
}

function bool(j: Json, key: string, def: boolean, where: string): boolean {
  const v = j[key] ?? def;
  if (typeof v !== "boolean") throw new Error(`${where}.${key}: expected true or false, got ${JSON.stringify(j[key])}`);
  return v;
}

function ropeTheta(j: Json, def: number, where: string): number {
  const rp = j["rope_parameters"];
  if (rp !== undefined && rp !== null) {
    if (typeof rp !== "object") throw new Error(`${where}.rope_parameters: expected an object`);
    const r = rp as Json;
    const type = r["rope_type"] ?? "default";
    if (type !== "default") throw new Error(`${where}.rope_parameters.rope_type: only "default" RoPE is supported, got ${JSON.stringify(type)}`);
    if (r["rope_theta"] !== undefined) return num(r, "rope_theta", def, `${where}.rope_parameters`);
  }
  const rs = j["rope_scaling"];
  if (rs !== undefined && rs !== null) {
    const t = (rs as Json)["rope_type"] ?? (rs as Json)["type"];
    if (t !== "default") throw new Error(`${where}.rope_scaling: scaled RoPE (${JSON.stringify(t)}) is not supported`);
  }
  return num(j, "rope_theta", def, where);
}

function decoderFields(j: Json, d: typeof LLAMA_DEFAULTS | typeof MIXTRAL_DEFAULTS, where: string): Omit<DecoderConfig, "model_type"> {
  const hidden = int(j, "hidden_size", d.hidden_size, where);
  const heads = int(j, "num_attention_heads", d.num_attention_heads, where);
  const kvDefault = "num_key_value_heads" in d ? d.num_key_value_heads : heads;
  const kv = int(j, "num_key_value_heads", j["num_key_value_heads"] === null ? heads : kvDefault, where);
  if (heads % kv !== 0) throw new Error(`${where}.num_key_value_heads: ${kv} must divide num_attention_heads ${heads}`);
  const hd = j["head_dim"] === null || j["head_dim"] === undefined ? undefined : j["head_dim"];
  if (hd === undefined && hidden % heads !== 0) throw new Error(`${where}.hidden_size: ${hidden} is not divisible by num_attention_heads ${heads} and head_dim is not set`);
  const head_dim = int({ head_dim: hd }, "head_dim", hidden / heads, where);
  if (head_dim % 2 !== 0) throw new Error(`${where}.head_dim: ${head_dim} must be even for RoPE`);
  const act = j["hidden_act"] ?? d.hidden_act;
  if (act !== "silu") throw new Error(`${where}.hidden_act: only "silu" is supported, got ${JSON.stringify(act)}`);
  const attention_bias = bool(j, "attention_bias", d.attention_bias, where);
  const mlp_bias = bool(j, "mlp_bias", d.mlp_bias, where);
  if (attention_bias || mlp_bias) throw new Error(`${where}: attention_bias/mlp_bias = true is not supported`);
  return {
    vocab_size: int(j, "vocab_size", d.vocab_size, where),
    hidden_size: hidden,
    intermediate_size: int(j, "intermediate_size", d.intermediate_size, where),
    num_hidden_layers: int(j, "num_hidden_layers", d.num_hidden_layers, where),
    num_attention_heads: heads,
    num_key_value_heads: kv,
    head_dim,
    hidden_act: "silu",
    max_position_embeddings: int(j, "max_position_embeddings", d.max_position_embeddings, where),
    initializer_range: num(j, "initializer_range", d.initializer_range, where),
    rms_norm_eps: num(j, "rms_norm_eps", d.rms_norm_eps, where),
    rope_theta: ropeTheta(j, d.rope_theta, where),
    tie_word_embeddings: bool(j, "tie_word_embeddings", d.tie_word_embeddings, where),
    attention_bias,
    mlp_bias,
  };
}

/** Parse a Llama `config.json` object, filling HF defaults. @throws naming the offending key. */
export function llamaConfig(j: Json = {}, where = "config"): LlamaConfig {
  if (j["model_type"] !== undefined && j["model_type"] !== "llama") throw new Error(`${where}.model_type: expected "llama", got ${JSON.stringify(j["model_type"])}`);
  return { model_type: "llama", ...decoderFields(j, LLAMA_DEFAULTS, where) };
}

/** Parse a Mixtral `config.json` object, filling HF defaults. @throws naming the offending key. */
export function mixtralConfig(j: Json = {}, where = "config"): MixtralConfig {
  if (j["model_type"] !== undefined && j["model_type"] !== "mixtral") throw new Error(`${where}.model_type: expected "mixtral", got ${JSON.stringify(j["model_type"])}`);
  const d = MIXTRAL_DEFAULTS;
  const E = int(j, "num_local_experts", d.num_local_experts, where);
  const k = int(j, "num_experts_per_tok", d.num_experts_per_tok, where);
  if (k > E) throw new Error(`${where}.num_experts_per_tok: ${k} exceeds num_local_experts ${E}`);
  if (k > 8) throw new Error(`${where}.num_experts_per_tok: at most 8 is supported, got ${k}`);
  const jitter = num(j, "router_jitter_noise", d.router_jitter_noise, where);
  if (jitter !== 0) throw new Error(`${where}.router_jitter_noise: only 0 is supported, got ${jitter}`);
  const sw = j["sliding_window"] ?? null;
  if (sw !== null) throw new Error(`${where}.sliding_window: sliding-window attention is not supported (got ${JSON.stringify(sw)}); set it to null`);
  return {
    model_type: "mixtral",
    ...decoderFields(j, d, where),
    num_local_experts: E,
    num_experts_per_tok: k,
    router_aux_loss_coef: num(j, "router_aux_loss_coef", d.router_aux_loss_coef, where),
    output_router_logits: bool(j, "output_router_logits", d.output_router_logits, where),
    router_jitter_noise: 0,
    sliding_window: null,
  };
}
