/**
 * AutoEP (DeepSpeed's `expert_parallel` section): find the MoE blocks of a loaded Hugging Face model
 * by preset (mixtral, qwen3_moe, qwen2_moe, deepseek_v2, deepseek_v3) and replace each with the
 * expert-parallel MoE layer, keeping its weights (the same router and expert parameters) and its
 * numerics (same top-k, renormalisation per `route_norm`, the model's summation order).
 * Selected by core's registry when `expert_parallel.enabled` (core/src/engine/registry.ts).
 *
 * How it composes (design.md "The six hooks"): the job's config resolver has checked every key
 * (config/resolve-expert-parallel.ts: each acts or is refused naming it) and made `autoep_size` the
 * job's expert-parallel group size (`moe.ep_size`, from which the engine builds the ep/edp groups).
 * This plugin requires the `moe` plugin, which supplies the expert-parallel parts that every
 * replaced layer routes through — the all_to_all_v token dispatcher, the partition wrap that
 * keeps an expert only on its ep rank (partitioned over its edp group by ZeRO 1–3) and the
 * checkpoint ownership of expert states. Through the contract's model transform
 * (`ctx.transformModel`, run after all setups and before partitioning) AutoEP detects the blocks
 * (detect.ts) and rebuilds each as an `MoELayer` bound to the model's shared MoE parts, which the
 * engine then fills with the moe plugin's dispatcher and router. A preset that does not match the
 * model fails here naming both.
 *
 * Checkpoints: contributes `plugins.autoep = { preset_model, autoep_size, blocks }`; a resume at
 * another autoep_size reshards (the loader reads expert states by unit name) and logs it.
 */
import { definePlugin, type EngineHooks, type SetupContext } from "@zeromoe/core/plugin";
import { AUTOEP_PRESETS, type ExpertParallelConfig } from "@zeromoe/core/config";
import { MoELayer } from "@zeromoe/core/nn";
import { detectMoEBlocks, moeLayersOf, type MoEBlockSpec } from "./detect.ts";

export { detectMoEBlocks, moeLayersOf, AutoEPDetectionError, type MoEBlockSpec, type SparseDecoder } from "./detect.ts";

type Hooks = EngineHooks & Record<string, unknown>;

/** The manifest entry AutoEP contributes (`plugins.autoep`). */
export interface AutoEPManifestEntry {
  preset_model: string;
  autoep_size: number;
  /** Module names of the replaced blocks. */
  blocks: string[];
}

function isEntry(x: unknown): x is AutoEPManifestEntry {
  const e = x as AutoEPManifestEntry | null;
  return typeof e === "object" && e !== null && typeof e.preset_model === "string" && typeof e.autoep_size === "number" && Array.isArray(e.blocks);
}

/** What AutoEP did on one engine (for tests and tools): the replaced blocks, after the transform. */
export interface AutoEPState {
  preset: string;
  autoepSize: number;
  blocks: MoEBlockSpec[];
  /** The replacement layers, by decoder layer. */
  replaced: Map<number, MoELayer>;
}

const STATES = new WeakMap<object, AutoEPState>();

/** AutoEP's state of an engine (any of its contexts, e.g. `engine.env`), or null. */
export function autoepStateOf(ctx: Pick<SetupContext, "groups">): AutoEPState | null {
  return STATES.get(ctx.groups) ?? null;
}

/** Build the AutoEP plugin (the default export). */
export function createAutoEPPlugin() {
  return definePlugin<Hooks, SetupContext>({
    name: "autoep",
    configKey: "expert_parallel",
    requires: ["moe"],
    setup(ctx) {
      const ep = ctx.config.expert_parallel as ExpertParallelConfig;
      if (!ep.enabled) throw new Error(`autoep plugin: expert_parallel.enabled is false (the registry selects this plugin only when it is true)`);
      const presetName = ep.preset_model;
      if (presetName === null) throw new Error(`autoep plugin: expert_parallel.preset_model was not resolved (resolve the job with resolveJobConfig)`);
      const preset = AUTOEP_PRESETS[presetName];
      const moe = ctx.config.moe;
      if (!moe) throw new Error(`autoep plugin: expert_parallel.preset_model "${presetName}": the job has no moe section (model_type "${ctx.config.model.model_type}")`);
      if (moe.ep_size !== ep.autoep_size) throw new Error(`autoep plugin: expert_parallel.autoep_size ${ep.autoep_size} but moe.ep_size ${moe.ep_size} (resolve the job with resolveJobConfig)`);
      if (ctx.groups.ep.size !== ep.autoep_size) throw new Error(`autoep plugin: the engine's ep group has ${ctx.groups.ep.size} ranks, expert_parallel.autoep_size is ${ep.autoep_size}`);
      const state: AutoEPState = { preset: presetName, autoepSize: ep.autoep_size, blocks: [], replaced: new Map() };
      STATES.set(ctx.groups, state);
      ctx.transformModel((model) => {
        const blocks = detectMoEBlocks(model, presetName, preset, ep);
        const layers = moeLayersOf(model)!;
        const parts = model.moe;
        if (!parts) throw new Error(`autoep plugin: model_type "${model.config.model_type}" has MoE layers but no shared MoE parts (model.moe)`);
        const normTopkProb = ep.route_norm ?? true;
        for (const b of blocks) {
          const old = layers[b.layer]!;
          const layer = new MoELayer(b.layer, old.gate, old.experts, b.topK, parts, { normTopkProb, routing: old.routing });
          layers[b.layer] = layer;
          state.replaced.set(b.layer, layer);
        }
        state.blocks = blocks;
        const E = blocks[0]!.numExperts;
        ctx.log(`autoep: preset ${presetName}: ${blocks.length} MoE blocks (${blocks.map((b) => b.module).join(", ")}) replaced by expert-parallel layers; ep groups of ${ep.autoep_size} ranks, ${E / ep.autoep_size} of ${E} experts per rank, top-${blocks[0]!.topK}`);
      });
      ctx.checkpoint.contribute("autoep", {
        save: () => ({ preset_model: presetName, autoep_size: ep.autoep_size, blocks: state.blocks.map((b) => b.module) }) satisfies AutoEPManifestEntry,
        restore: (saved) => {
          if (!isEntry(saved)) throw new Error(`autoep plugin: the checkpoint's plugins.autoep entry is not { preset_model, autoep_size, blocks }`);
          if (saved.preset_model !== presetName) throw new Error(`autoep plugin: the checkpoint was saved with expert_parallel.preset_model "${saved.preset_model}", this job's is "${presetName}"`);
          if (saved.autoep_size !== ep.autoep_size) ctx.log(`autoep: resuming a checkpoint saved at autoep_size ${saved.autoep_size} with autoep_size ${ep.autoep_size}: expert states are resharded by expert`);
        },
        check: (saved) => {
          if (!isEntry(saved)) return null;
          const now = state.blocks.map((b) => b.module);
          if (saved.preset_model !== presetName) return `the checkpoint's AutoEP preset is "${saved.preset_model}", this job's is "${presetName}"`;
          if (JSON.stringify(saved.blocks) !== JSON.stringify(now)) return `the checkpoint's AutoEP blocks (${saved.blocks.join(", ")}) differ from this model's (${now.join(", ")})`;
          return null;
        },
      });
    },
  });
}

/** The AutoEP plugin. */
export const autoep = createAutoEPPlugin();

export default autoep;
