/**
 * Parameter counts of a resolved model config, from the Hugging Face module layout
 * (LlamaForCausalLM / MixtralForCausalLM): embeddings V·H; per layer two RMSNorm weights (2H),
 * q/o projections (2·H·nH·d), k/v projections (2·H·nKV·d) (+ biases with attention_bias), and a
 * SwiGLU MLP 3·H·I (+ biases with mlp_bias) — or, in a layer with experts (config/moe-shape.ts),
 * a router H·E plus E experts of 3·H·I_e each (I_e: Mixtral intermediate_size, Qwen3-MoE
 * moe_intermediate_size); Qwen3-MoE adds q_norm/k_norm (2·d) per layer, Qwen2-MoE q/k/v biases
 * and a shared expert with its gate in each MoE layer (moe-shape.ts `layerExtraParams`); a final norm H; an LM head
 * V·H unless tied. Used for summaries and memory estimates.
 */
import { attentionParams, layerExtraParams, moeShape } from "./moe-shape.ts";
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
  // q/k/v/o all carry a bias when attention_bias (HF LlamaAttention / MixtralAttention)
  const attnBias = m.attention_bias ? m.num_attention_heads * d + 2 * m.num_key_value_heads * d + H : 0;
  const attn = attentionParams(m) + attnBias;
  const norms = 2 * H;
  const mlpOne = 3 * H * m.intermediate_size;
  const denseMlp = mlpOne + (m.model_type === "llama" && m.mlp_bias ? 2 * m.intermediate_size + H : 0);
  const shape = moeShape(m);
  const sparse = new Set(shape?.layers ?? []);
  let layersTotal = 0;
  let layersActive = 0;
  let expert = 0;
  for (let l = 0; l < m.num_hidden_layers; l++) {
    // Qwen3-MoE q_norm/k_norm, Qwen2-MoE q/k/v biases and shared expert (moe-shape.ts)
    const base = attn + norms + layerExtraParams(m, l);
    if (shape && sparse.has(l)) {
      const one = 3 * H * shape.expertIntermediate;
      expert += shape.numExperts * one;
      layersTotal += base + H * shape.numExperts + shape.numExperts * one;
      layersActive += base + H * shape.numExperts + shape.topK * one;
    } else {
      layersTotal += base + denseMlp;
      layersActive += base + denseMlp;
    }
  }
  const embedding = m.vocab_size * H;
  const head = m.tie_word_embeddings ? 0 : m.vocab_size * H;
  return {
    total: embedding + head + H + layersTotal,
    activePerToken: embedding + head + H + layersActive,
    expert,
    embedding,
    head,
  };
}
