/**
 * Where a model config's experts are, whatever the family: the one place that knows which
 * `model_type`s are sparse, so the MoE section, the memory estimate, the parameter count and the
 * plugins need no per-family code.
 */
import type { ModelConfig, SparseModelConfig } from "./types.ts";

/** The MoE shape of a sparse model. */
export interface MoEShape {
  /** Experts per MoE layer (E). */
  numExperts: number;
  /** Experts per token (k). */
  topK: number;
  /** Hidden width of one expert's SwiGLU. */
  expertIntermediate: number;
  /** Decoder layers that have experts, ascending (Mixtral: all). */
  layers: number[];
}

/** True for a config with MoE layers. */
export function isSparseModel(m: ModelConfig): m is SparseModelConfig {
  return m.model_type !== "llama";
}

/**
 * The decoder layers with experts. Mixtral: every layer. Qwen3-MoE and Qwen2-MoE (HF `Qwen3MoeDecoderLayer`, `Qwen2MoeDecoderLayer`):
 * layer l iff l ∉ mlp_only_layers and (l + 1) % decoder_sparse_step == 0. DeepSeek-V2/V3: l ≥
 * first_k_dense_replace. Dense models: none.
 */
export function moeLayerIndices(m: ModelConfig): number[] {
  const all = Array.from({ length: m.num_hidden_layers }, (_, l) => l);
  if (m.model_type === "mixtral") return all;
  if (m.model_type === "deepseek_v3" || m.model_type === "deepseek_v2") return all.filter((l) => l >= m.first_k_dense_replace);
  if (m.model_type === "qwen3_moe" || m.model_type === "qwen2_moe") return all.filter((l) => !m.mlp_only_layers.includes(l) && m.num_local_experts > 0 && (l + 1) % m.decoder_sparse_step === 0);
  return [];
}

/** The MoE shape of `m`, or null for a dense model. */
export function moeShape(m: ModelConfig): MoEShape | null {
  if (!isSparseModel(m)) return null;
  const expertIntermediate = m.model_type === "mixtral" ? m.intermediate_size : m.moe_intermediate_size;
  return { numExperts: m.num_local_experts, topK: m.num_experts_per_tok, expertIntermediate, layers: moeLayerIndices(m) };
}

/**
 * Elements of decoder layer `layer`'s unit beyond the attention weights (2·H·nH·d + 2·H·nKV·d),
 * the two RMSNorm weights and the feed-forward (dense SwiGLU, or the router H·E):
 * Qwen3-MoE's q_norm/k_norm (2·d); Qwen2-MoE's q/k/v biases (nH·d + 2·nKV·d, with qkv_bias) and, in
 * a layer with experts, its shared expert (3·H·I_s) and shared-expert gate (H). Llama's and
 * Mixtral's attention_bias/mlp_bias are counted by the callers.
 */
export function layerExtraParams(m: ModelConfig, layer: number): number {
  const d = m.head_dim;
  if (m.model_type === "qwen3_moe") return 2 * d;
  if (m.model_type === "qwen2_moe") {
    const bias = m.qkv_bias ? (m.num_attention_heads + 2 * m.num_key_value_heads) * d : 0;
    const shared = moeLayerIndices(m).includes(layer) ? 3 * m.hidden_size * m.shared_expert_intermediate_size + m.hidden_size : 0;
    return bias + shared;
  }
  if (m.model_type === "deepseek_v3" || m.model_type === "deepseek_v2") {
    const n = m.n_shared_experts ?? 0;
    return moeLayerIndices(m).includes(layer) && n > 0 ? 3 * m.hidden_size * m.moe_intermediate_size * n : 0;
  }
  return 0;
}

/**
 * Attention weights of one decoder layer. Llama-style: q/o 2·H·nH·d, k/v 2·H·nKV·d. DeepSeek's
 * multi-head latent attention (qk = qk_nope + qk_rope): q = H·nH·qk, or with q_lora_rank r_q
 * H·r_q + r_q (q_a_layernorm) + r_q·nH·qk; kv_a_proj_with_mqa H·(r_kv + qk_rope); kv_a_layernorm
 * r_kv; kv_b_proj r_kv·nH·(qk_nope + v); o_proj nH·v·H. (Biases: the callers.)
 */
export function attentionParams(m: ModelConfig): number {
  const H = m.hidden_size;
  const nH = m.num_attention_heads;
  if (m.model_type === "deepseek_v3" || m.model_type === "deepseek_v2") {
    const qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    const q = m.q_lora_rank === null ? H * nH * qk : H * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * nH * qk;
    const kv = H * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank + m.kv_lora_rank * nH * (m.qk_nope_head_dim + m.v_head_dim);
    return q + kv + nH * m.v_head_dim * H;
  }
  return 2 * H * nH * m.head_dim + 2 * H * m.num_key_value_heads * m.head_dim;
}

/** Hugging Face names of the model's buffers (state saved with the model, not trained):
 * DeepSeek-V3's `model.layers.{l}.mlp.gate.e_score_correction_bias` of each MoE layer; none
 * for the other families. */
export function modelBufferNames(m: ModelConfig): string[] {
  if (m.model_type !== "deepseek_v3") return [];
  return moeLayerIndices(m).map((l) => `model.layers.${l}.mlp.gate.e_score_correction_bias`);
}
