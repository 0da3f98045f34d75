/**
 * AutoEP presets: for each Hugging Face MoE family, where its MoE blocks sit and how they route —
 * the facts DeepSpeed's AutoEP keeps per `preset_model` (DeepSpeed docs, "AutoEP": moe_layer_pattern,
 * router/expert child names, expert weight names, config attributes, score function, shared
 * experts). The config resolver checks `expert_parallel`'s keys against them
 * (resolve-expert-parallel.ts) and the AutoEP plugin finds the blocks of a loaded model with them.
 *
 * Module names are ZeroMoE's parameter-name prefixes, i.e. the Hub checkpoint's names: Mixtral's
 * block is `model.layers.{l}.block_sparse_moe` (Transformers 5 renames it `mlp` in memory; both
 * are accepted), every other family's is `model.layers.{l}.mlp`.
 */
import type { ExpertParallelConfig } from "./types.ts";

/** A family name AutoEP knows. */
export type AutoEPPresetName = NonNullable<ExpertParallelConfig["preset_model"]>;

/** One preset (module comment). */
export interface AutoEPPreset {
  /** Regex (full match) of the MoE block module names. */
  moeLayerPattern: string;
  /** Child name of the router (its weight `{block}.{router}.weight`, [E, hidden]). */
  router: string;
  /** Child name of the experts (`{block}.{experts}.{e}.{w}.weight`). */
  experts: string;
  /** Per-expert weight names in the Hub layout: gate (w1), down (w2), up (w3). */
  w1: string;
  w2: string;
  w3: string;
  /** Transformers 5's fused names (w3 null: gate and up fused in `gate_up_proj`). */
  fusedW1: "gate_up_proj";
  fusedW2: "down_proj";
  /** Config keys holding the number of routed experts (the first is the canonical one) and top-k. */
  numExpertsAttrs: readonly string[];
  topKAttr: "num_experts_per_tok";
  scoreFunc: "softmax" | "sigmoid";
  /** Name of the shared-expert child, or null when the family has none. */
  sharedExperts: string | null;
}

const layersMlp = String.raw`model\.layers\.\d+\.mlp`;

/** The presets by family. */
export const AUTOEP_PRESETS: Readonly<Record<AutoEPPresetName, AutoEPPreset>> = {
  mixtral: {
    moeLayerPattern: String.raw`model\.layers\.\d+\.(block_sparse_moe|mlp)`,
    router: "gate", experts: "experts", w1: "w1", w2: "w2", w3: "w3", fusedW1: "gate_up_proj", fusedW2: "down_proj",
    numExpertsAttrs: ["num_local_experts"], topKAttr: "num_experts_per_tok", scoreFunc: "softmax", sharedExperts: null,
  },
  qwen3_moe: {
    moeLayerPattern: layersMlp,
    router: "gate", experts: "experts", w1: "gate_proj", w2: "down_proj", w3: "up_proj", fusedW1: "gate_up_proj", fusedW2: "down_proj",
    numExpertsAttrs: ["num_local_experts", "num_experts"], topKAttr: "num_experts_per_tok", scoreFunc: "softmax", sharedExperts: null,
  },
  qwen2_moe: {
    moeLayerPattern: layersMlp,
    router: "gate", experts: "experts", w1: "gate_proj", w2: "down_proj", w3: "up_proj", fusedW1: "gate_up_proj", fusedW2: "down_proj",
    numExpertsAttrs: ["num_local_experts", "num_experts"], topKAttr: "num_experts_per_tok", scoreFunc: "softmax", sharedExperts: "shared_expert",
  },
  deepseek_v2: {
    moeLayerPattern: layersMlp,
    router: "gate", experts: "experts", w1: "gate_proj", w2: "down_proj", w3: "up_proj", fusedW1: "gate_up_proj", fusedW2: "down_proj",
    numExpertsAttrs: ["n_routed_experts", "num_local_experts"], topKAttr: "num_experts_per_tok", scoreFunc: "softmax", sharedExperts: "shared_experts",
  },
  deepseek_v3: {
    moeLayerPattern: layersMlp,
    router: "gate", experts: "experts", w1: "gate_proj", w2: "down_proj", w3: "up_proj", fusedW1: "gate_up_proj", fusedW2: "down_proj",
    numExpertsAttrs: ["n_routed_experts", "num_local_experts"], topKAttr: "num_experts_per_tok", scoreFunc: "sigmoid", sharedExperts: "shared_experts",
  },
};
