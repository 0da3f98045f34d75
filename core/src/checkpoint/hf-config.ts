/**
 * A Hugging Face `config.json` for a model this engine trained, so that an exported directory
 * (`model.safetensors` + `config.json`) loads with Transformers' `AutoModelForCausalLM.from_pretrained`
 * like one written by `save_pretrained`.
 *
 * Transformers 5 validates configs as strict dataclasses: a float field given as a JSON integer
 * (`"router_jitter_noise": 0`) is refused ("expected float, got int"). JavaScript's JSON.stringify
 * writes the number 0 as `0`, so the float-typed keys are written with a decimal point (`0.0`).
 */
import { writeFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import type { ModelConfig } from "../config/types.ts";

/** HF config keys whose type is float in Transformers' LlamaConfig / MixtralConfig. */
const FLOAT_KEYS = new Set(["factor", "low_freq_factor", "high_freq_factor", "rms_norm_eps", "rope_theta", "initializer_range", "attention_dropout", "router_aux_loss_coef", "router_jitter_noise", "routed_scaling_factor"]);

/** Transformers dtype names of our storage dtypes. */
const TORCH_DTYPE = { f32: "float32", bf16: "bfloat16", f16: "float16" } as const;

/** The config object (Transformers 5 key names) for `cfg`, weights stored as `dtype`. */
export function hfConfigObject(cfg: ModelConfig, dtype: keyof typeof TORCH_DTYPE): Record<string, unknown> {
  const base: Record<string, unknown> = {
    architectures: [cfg.model_type === "mixtral" ? "MixtralForCausalLM" : "LlamaForCausalLM"],
    model_type: cfg.model_type,
    vocab_size: cfg.vocab_size,
    hidden_size: cfg.hidden_size,
    intermediate_size: cfg.intermediate_size,
    num_hidden_layers: cfg.num_hidden_layers,
    num_attention_heads: cfg.num_attention_heads,
    num_key_value_heads: cfg.num_key_value_heads,
    head_dim: cfg.head_dim,
    hidden_act: cfg.hidden_act,
    max_position_embeddings: cfg.max_position_embeddings,
    initializer_range: cfg.initializer_range,
    rms_norm_eps: cfg.rms_norm_eps,
    rope_theta: cfg.rope_theta,
    // Transformers 5 reads rope_parameters, 4 rope_scaling (null when unscaled)
    rope_parameters: cfg.rope_scaling ? { ...cfg.rope_scaling, rope_theta: cfg.rope_theta } : { rope_type: "default", rope_theta: cfg.rope_theta },
    rope_scaling: cfg.rope_scaling ? { ...cfg.rope_scaling } : null,
    tie_word_embeddings: cfg.tie_word_embeddings,
    attention_bias: cfg.attention_bias,
    attention_dropout: cfg.attention_dropout,
    bos_token_id: cfg.bos_token_id,
    eos_token_id: cfg.eos_token_id,
    pad_token_id: cfg.pad_token_id,
    use_cache: true,
    dtype: TORCH_DTYPE[dtype],
  };
  if (cfg.model_type === "llama") return { ...base, mlp_bias: cfg.mlp_bias };
  if (cfg.model_type === "qwen3_moe") {
    return {
      ...base,
      architectures: ["Qwen3MoeForCausalLM"],
      // Transformers 4's Qwen3MoeConfig reads num_experts, 5's num_local_experts: both, equal
      num_experts: cfg.num_local_experts,
      num_local_experts: cfg.num_local_experts,
      num_experts_per_tok: cfg.num_experts_per_tok,
      moe_intermediate_size: cfg.moe_intermediate_size,
      norm_topk_prob: cfg.norm_topk_prob,
      decoder_sparse_step: cfg.decoder_sparse_step,
      mlp_only_layers: [...cfg.mlp_only_layers],
      router_aux_loss_coef: cfg.router_aux_loss_coef,
      output_router_logits: cfg.output_router_logits,
      use_sliding_window: cfg.use_sliding_window,
      sliding_window: cfg.sliding_window,
    };
  }
  if (cfg.model_type === "qwen2_moe") {
    // Qwen2MoeConfig has no head_dim / attention_bias (head_dim = hidden / heads; qkv_bias instead)
    // and names the expert count num_experts
    const { head_dim: _hd, attention_bias: _ab, ...rest } = base;
    return {
      ...rest,
      architectures: ["Qwen2MoeForCausalLM"],
      // Transformers 4 reads num_experts, 5 maps num_local_experts onto it: both, equal
      num_experts: cfg.num_local_experts,
      num_local_experts: cfg.num_local_experts,
      num_experts_per_tok: cfg.num_experts_per_tok,
      moe_intermediate_size: cfg.moe_intermediate_size,
      shared_expert_intermediate_size: cfg.shared_expert_intermediate_size,
      norm_topk_prob: cfg.norm_topk_prob,
      qkv_bias: cfg.qkv_bias,
      decoder_sparse_step: cfg.decoder_sparse_step,
      mlp_only_layers: [...cfg.mlp_only_layers],
      router_aux_loss_coef: cfg.router_aux_loss_coef,
      output_router_logits: cfg.output_router_logits,
      use_sliding_window: cfg.use_sliding_window,
      sliding_window: cfg.sliding_window,
    };
  }
  if (cfg.model_type === "deepseek_v3" || cfg.model_type === "deepseek_v2") {
    const v3 = cfg.model_type === "deepseek_v3";
    return {
      ...base,
      architectures: [v3 ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM"],
      n_routed_experts: cfg.num_local_experts,
      num_experts_per_tok: cfg.num_experts_per_tok,
      moe_intermediate_size: cfg.moe_intermediate_size,
      n_shared_experts: cfg.n_shared_experts,
      first_k_dense_replace: cfg.first_k_dense_replace,
      n_group: cfg.n_group,
      topk_group: cfg.topk_group,
      routed_scaling_factor: cfg.routed_scaling_factor,
      norm_topk_prob: cfg.norm_topk_prob,
      q_lora_rank: cfg.q_lora_rank,
      kv_lora_rank: cfg.kv_lora_rank,
      qk_rope_head_dim: cfg.qk_rope_head_dim,
      qk_nope_head_dim: cfg.qk_nope_head_dim,
      v_head_dim: cfg.v_head_dim,
      qk_head_dim: cfg.qk_nope_head_dim + cfg.qk_rope_head_dim,
      ...(cfg.model_type === "deepseek_v3" ? { rope_interleave: cfg.rope_interleave } : { topk_method: cfg.topk_method, mlp_bias: cfg.mlp_bias }),
    };
  }
  return {
    ...base,
    num_local_experts: cfg.num_local_experts,
    num_experts_per_tok: cfg.num_experts_per_tok,
    router_aux_loss_coef: cfg.router_aux_loss_coef,
    output_router_logits: cfg.output_router_logits,
    router_jitter_noise: cfg.router_jitter_noise,
    sliding_window: cfg.sliding_window,
  };
}

/** JSON text of a config object with the float-typed keys (at any depth) written as floats. */
export function formatHfConfigJson(obj: Record<string, unknown>): string {
  const MARK = "@@zeromoe-float@@";
  const text = JSON.stringify(
    obj,
    (key, v) => (FLOAT_KEYS.has(key) && typeof v === "number" && Number.isFinite(v) ? `${MARK}${Number.isInteger(v) ? v.toFixed(1) : String(v)}` : v),
    2,
  );
  return `${text.replace(new RegExp(`"${MARK}([^"]+)"`, "g"), "$1")}\n`;
}

/** Write `<dir>/config.json` for `cfg` (temporary file, then rename). @throws fs errors. */
export function writeHfConfig(dir: string, cfg: ModelConfig, dtype: keyof typeof TORCH_DTYPE): string {
  const path = join(dir, "config.json");
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, formatHfConfigJson(hfConfigObject(cfg, dtype)));
  renameSync(tmp, path);
  return path;
}
