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
 * The decoder layers with experts. Mixtral: every layer. Qwen3-MoE (HF `Qwen3MoeDecoderLayer`):
 * layer l iff l ∉ mlp_only_layers and (l + 1) % decoder_sparse_step == 0. Dense models: none.
 */
export function moeLayerIndices(m: ModelConfig): number[] {
  const all = Array.from({ length: m.num_hidden_layers }, (_, l) => l);
  if (m.model_type === "mixtral") return all;
  if (m.model_type === "qwen3_moe") return all.filter((l) => !m.mlp_only_layers.includes(l) && m.num_local_experts > 0 && (l + 1) % m.decoder_sparse_step === 0);
  return [];
}

/** The MoE shape of `m`, or null for a dense model. */
export function moeShape(m: ModelConfig): MoEShape | null {
  if (!isSparseModel(m)) return null;
  const expertIntermediate = m.model_type === "qwen3_moe" ? m.moe_intermediate_size : m.intermediate_size;
  return { numExperts: m.num_local_experts, topK: m.num_experts_per_tok, expertIntermediate, layers: moeLayerIndices(m) };
}
