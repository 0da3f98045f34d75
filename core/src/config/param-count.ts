/**
 * Parameter counts of a resolved model config, from the Hugging Face module layout
 * (LlamaForCausalLM / MixtralForCausalLM): embeddings V·H; per layer two RMSNorm weights (2H),
 * q/o projections (2·H·nH·d), k/v projections (2·H·nKV·d) (+ biases with attention_bias), and a
 * SwiGLU MLP 3·H·I (+ biases with mlp_bias) — or, for Mixtral, a router H·E plus E experts of
 * 3·H·I each; a final norm H; an LM head V·H unless tied. Used for summaries and memory estimates.
 */
import type { ModelConfig } from "./types.ts";

/** Parameter counts (elements). */
export interface ParameterCount {
  /** All parameters. */
  total: number;
  /** Parameters one token uses in forward: experts counted k times instead of E (dense: = total). */
  activePerToken: number;
  /** Parameters inside experts (0 for dense models). */
  expert: number;
  embedding: number;
  /** LM head (0 when tied). */
  head: number;
}

/** Counts the parameters of `m` (see the module comment for the layout). */
export function countParameters(m: ModelConfig): ParameterCount {
  const H = m.hidden_size;
  const d = m.head_dim;
  const q = H * m.num_attention_heads * d;
  const kv = H * m.num_key_value_heads * d;
  // q/k/v/o all carry a bias when attention_bias (HF LlamaAttention / MixtralAttention)
  const attnBias = m.attention_bias ? m.num_attention_heads * d + 2 * m.num_key_value_heads * d + H : 0;
  const attn = 2 * q + 2 * kv + attnBias;
  const norms = 2 * H;
  const mlpOne = 3 * H * m.intermediate_size;
  let perLayer: number;
  let perLayerActive: number;
  let expertPerLayer = 0;
  if (m.model_type === "mixtral") {
    expertPerLayer = m.num_local_experts * mlpOne;
    perLayer = attn + norms + H * m.num_local_experts + expertPerLayer;
    perLayerActive = attn + norms + H * m.num_local_experts + m.num_experts_per_tok * mlpOne;
  } else {
    const mlp = mlpOne + (m.mlp_bias ? 2 * m.intermediate_size + H : 0);
    perLayer = attn + norms + mlp;
    perLayerActive = perLayer;
  }
  const embedding = m.vocab_size * H;
  const head = m.tie_word_embeddings ? 0 : m.vocab_size * H;
  const L = m.num_hidden_layers;
  return {
    total: embedding + head + H + L * perLayer,
    activePerToken: embedding + head + H + L * perLayerActive,
    expert: L * expertPerLayer,
    embedding,
    head,
  };
}
