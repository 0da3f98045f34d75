/**
 * Finding a loaded model's MoE blocks by AutoEP preset (DeepSpeed AutoEP's detection step: module
 * names matching `moe_layer_pattern`, with a router child of weight [E, hidden], E experts of the
 * preset's weight names and, for families with them, the shared experts; E and top-k from the
 * config). Works on ZeroMoE's parameter names (the Hub
 * checkpoint's), so a model loaded from either weight layout is found the same way.
 */
import type { AutoEPPreset, ExpertParallelConfig } from "@zeromoe/core/config";
import type { MoELayer } from "@zeromoe/core/nn";
import type { CausalDecoder } from "@zeromoe/core/models";

/** One detected MoE block. */
export interface MoEBlockSpec {
  /** Decoder layer index. */
  layer: number;
  /** Module name, e.g. `model.layers.0.mlp`. */
  module: string;
  numExperts: number;
  topK: number;
  /** Hidden size and one expert's intermediate size (from the weights). */
  hidden: number;
  ffn: number;
}

/** A sparse decoder as AutoEP sees it: the MoE layer of each decoder layer (undefined: dense). */
export interface SparseDecoder {
  moeLayers: (MoELayer | undefined)[];
}

/** `model.moeLayers` when the model has MoE layers, else null. */
export function moeLayersOf(model: CausalDecoder): (MoELayer | undefined)[] | null {
  const layers = (model as unknown as Partial<SparseDecoder>).moeLayers;
  return Array.isArray(layers) ? layers : null;
}

/** Thrown when the model's blocks do not match the preset (the message names both). */
export class AutoEPDetectionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AutoEPDetectionError";
  }
}

/**
 * The MoE blocks of `model` per `preset` and the job's `expert_parallel` overrides.
 * Every MoE layer must be found, with the preset's router and expert names and shapes; AutoEP here
 * replaces all blocks or none.
 * @throws AutoEPDetectionError naming the preset, the module and what differs (no MoE layers;
 *   a block outside `moe_layer_pattern`; a missing router/expert weight; a shape or count mismatch)
 */
export function detectMoEBlocks(model: CausalDecoder, presetName: string, preset: AutoEPPreset, ep: ExpertParallelConfig): MoEBlockSpec[] {
  const layers = moeLayersOf(model);
  const type = model.config.model_type;
  if (!layers || layers.every((l) => l === undefined)) {
    throw new AutoEPDetectionError(`expert_parallel.preset_model "${presetName}": the model (model_type "${type}") has no MoE blocks`);
  }
  const pattern = ep.moe_layer_pattern ?? preset.moeLayerPattern;
  const re = new RegExp(`^(?:${pattern})$`);
  const suffix = `.${preset.router}.weight`;
  const out: MoEBlockSpec[] = [];
  layers.forEach((moe, l) => {
    if (!moe) return;
    const gateName = moe.gate.name;
    if (!gateName.endsWith(suffix)) {
      throw new AutoEPDetectionError(`expert_parallel.preset_model "${presetName}": layer ${l}'s router is ${gateName}, not "<block>${suffix}" (model_type "${type}")`);
    }
    const module = gateName.slice(0, -suffix.length);
    if (!re.test(module)) {
      const key = ep.moe_layer_pattern !== null ? "expert_parallel.moe_layer_pattern" : `expert_parallel.preset_model "${presetName}"`;
      throw new AutoEPDetectionError(`${key}: the MoE block ${module} does not match /${pattern}/ (AutoEP replaces every MoE block of the model; model_type "${type}")`);
    }
    const E = moe.experts.numExperts;
    const [gE, hidden] = moe.gate.shape as [number, number];
    if (gE !== E) throw new AutoEPDetectionError(`${module}.${preset.router}.weight has ${gE} rows, the block has ${E} experts`);
    const units = moe.experts.units();
    let ffn = -1;
    units.forEach((u, e) => {
      const pre = `${module}.${preset.experts}.${e}.`;
      for (const w of [preset.w1, preset.w2, preset.w3]) {
        if (!u.params.some((p) => p.name === `${pre}${w}.weight`)) {
          throw new AutoEPDetectionError(`expert_parallel.preset_model "${presetName}": expert ${e} of ${module} has no ${pre}${w}.weight (its parameters: ${u.params.map((p) => p.name).join(", ")})`);
        }
      }
      const w1 = u.params.find((p) => p.name === `${pre}${preset.w1}.weight`)!;
      const [i1, h1] = w1.shape as [number, number];
      if (h1 !== hidden) throw new AutoEPDetectionError(`${w1.name} is [${w1.shape.join(", ")}], the router's hidden size is ${hidden}`);
      if (ffn >= 0 && i1 !== ffn) throw new AutoEPDetectionError(`${w1.name} is [${w1.shape.join(", ")}]; expert 0 of ${module} has intermediate size ${ffn}`);
      ffn = i1;
    });
    // the family's shared experts (Qwen2-MoE shared_expert, DeepSeek shared_experts) sit beside the
    // routed ones in the same block; they stay dense (replicated, reduced over dp)
    const sharedCount = (model.config as { n_shared_experts?: number | null }).n_shared_experts;
    if (preset.sharedExperts && sharedCount !== null && sharedCount !== 0) {
      const name = `${module}.${preset.sharedExperts}.gate_proj.weight`;
      if (!model.units.has(name)) throw new AutoEPDetectionError(`expert_parallel.preset_model "${presetName}": ${module} has no shared experts (${name}); model_type "${type}"`);
    }
    const topK = ep.top_k === "auto" ? moe.topK : ep.top_k;
    if (topK !== moe.topK) throw new AutoEPDetectionError(`expert_parallel.top_k ${topK} differs from layer ${l}'s top-${moe.topK}`);
    out.push({ layer: l, module, numExperts: E, topK, hidden, ffn });
  });
  return out;
}
