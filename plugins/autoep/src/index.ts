/**
 * AutoEP (DeepSpeed's `expert_parallel` section): find the MoE blocks of a loaded Hugging Face model
 * by preset (mixtral, qwen3_moe, qwen2_moe, deepseek_v2, deepseek_v3) and replace each with the
 * expert-parallel MoE layer, keeping its weights (the same router and expert parameters) and its
 * numerics (same top-k, renormalisation per `route_norm`, the model's summation order).
 * Selected by core's registry when `expert_parallel.enabled` (core/src/engine/registry.ts).
 *
 * How it composes (docs/architecture.md "The six hooks"): the job's config resolver has checked every key
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
 * Aux-loss-free load balancing (`load_balance_coeff`, load-balance.ts): every replaced layer gets a
 * per-expert selection bias (DeepSeek-V3 keeps its `e_score_correction_bias` array), the router is
 * wrapped (route hook) to count each training micro-batch's picks, and after every step
 * (`ctx.metrics.afterStep`, a collective on every rank) the counts are summed over dp and the
 * biases updated.
 *
 * Checkpoints: contributes `plugins.autoep = { preset_model, autoep_size, blocks, load_balance_coeff,
 * expert_bias }` (the biases by layer); `--resume` gives the biases back before the transform
 * (restore), so training continues exactly. A resume at another autoep_size reshards (the loader
 * reads expert states by unit name) and logs it. `--summary` gets an `autoep` section (the biases).
 */
import { definePlugin, type EngineHooks, type SetupContext } from "@zeromoe/core/plugin";
import { AUTOEP_PRESETS, type ExpertParallelConfig } from "@zeromoe/core/config";
import { MoELayer, type MoERouter } from "@zeromoe/core/nn";
import { detectMoEBlocks, moeLayersOf, type MoEBlockSpec } from "./detect.ts";
import { ExpertBiasBalancer } from "./load-balance.ts";

export { detectMoEBlocks, moeLayersOf, AutoEPDetectionError, type MoEBlockSpec, type SparseDecoder } from "./detect.ts";
export { ExpertBiasBalancer, applyBiasUpdate } from "./load-balance.ts";

type Hooks = EngineHooks & Record<string, unknown>;

/** The manifest entry AutoEP contributes (`plugins.autoep`). */
export interface AutoEPManifestEntry {
  preset_model: string;
  autoep_size: number;
  /** Module names of the replaced blocks. */
  blocks: string[];
  /** γ of the aux-loss-free balancing (null: off). */
  load_balance_coeff?: number | null;
  /** Selection bias of each MoE layer that has one, by decoder layer index. */
  expert_bias?: Record<string, number[]>;
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
  /** The aux-loss-free balancer (load_balance_coeff set), else null. */
  balancer: ExpertBiasBalancer | null;
  /** The selection bias of each replaced layer that has one (live arrays). */
  biases?: Map<number, Float32Array>;
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
      const state: AutoEPState = { preset: presetName, autoepSize: ep.autoep_size, blocks: [], replaced: new Map(), balancer: null };
      STATES.set(ctx.groups, state);
      const coeff = ep.load_balance_coeff;
      // biases given back by a resumed checkpoint (restore runs before the transform)
      let restoredBias: Record<string, number[]> | null = null;
      ctx.transformModel((model) => {
        const blocks = detectMoEBlocks(model, presetName, preset, ep);
        const layers = moeLayersOf(model)!;
        const parts = model.moe;
        if (!parts) throw new Error(`autoep plugin: model_type "${model.config.model_type}" has MoE layers but no shared MoE parts (model.moe)`);
        const normTopkProb = ep.route_norm ?? true;
        const biases = new Map<number, Float32Array>();
        for (const b of blocks) {
          const old = layers[b.layer]!;
          // the family's own bias array (DeepSeek-V3) is kept; balancing gives every other layer one
          let bias = old.routing.selectionBias ?? null;
          if (!bias && coeff !== null) bias = new Float32Array(b.numExperts);
          const saved = restoredBias?.[String(b.layer)];
          if (bias && saved) {
            if (saved.length !== bias.length) throw new Error(`autoep plugin: the checkpoint's expert_bias of layer ${b.layer} has ${saved.length} values, the layer has ${bias.length} experts`);
            bias.set(saved);
          }
          if (bias) biases.set(b.layer, bias);
          const routing = bias ? { ...old.routing, selectionBias: bias } : old.routing;
          const layer = new MoELayer(b.layer, old.gate, old.experts, b.topK, parts, { normTopkProb, routing });
          layers[b.layer] = layer;
          state.replaced.set(b.layer, layer);
        }
        state.blocks = blocks;
        if (coeff !== null) state.balancer = new ExpertBiasBalancer(coeff, biases);
        state.biases = biases;
        const E = blocks[0]!.numExperts;
        ctx.log(`autoep: preset ${presetName}: ${blocks.length} MoE blocks (${blocks.map((b) => b.module).join(", ")}) replaced by expert-parallel layers; ep groups of ${ep.autoep_size} ranks, ${E / ep.autoep_size} of ${E} experts per rank, top-${blocks[0]!.topK}`);
      });
      const biasRecord = (): Record<string, number[]> => Object.fromEntries([...(state.biases ?? new Map())].map(([l, b]) => [String(l), Array.from(b)]));
      if (coeff !== null) {
        // count each training micro-batch's picks (not evaluation, not recomputation in backward)
        ctx.wrap("route", (prev) => ({
          ...prev,
          dispatcher: (hc) => prev.dispatcher(hc),
          router: (hc) => {
            const inner = prev.router?.(hc) ?? null;
            if (!inner) throw new Error(`autoep plugin: expert_parallel.load_balance_coeff needs the moe plugin's router (the route hook supplied none)`);
            const counting: MoERouter = {
              name: `${inner.name}+load-balance`,
              get mixtralAuxCoef() {
                return inner.mixtralAuxCoef;
              },
              gating: (req) => inner.gating(req),
              routing: async (req) => {
                const d = await inner.routing(req);
                if (hc.phase.training && !hc.phase.backward) state.balancer?.observe(req.layer, d.counts ?? Int32Array.from(await d.expertCounts!.toArray()));
                return d;
              },
            };
            return counting;
          },
        }));
        ctx.metrics.afterStep(async () => {
          await state.balancer?.step(ctx.comm, ctx.groups.dp);
          return {};
        });
      }
      ctx.metrics.summary("autoep", () => ({ preset_model: presetName, autoep_size: ep.autoep_size, load_balance_coeff: coeff, expert_bias: biasRecord() }));
      ctx.checkpoint.contribute("autoep", {
        save: () => ({ preset_model: presetName, autoep_size: ep.autoep_size, blocks: state.blocks.map((b) => b.module), load_balance_coeff: coeff, expert_bias: biasRecord() }) satisfies AutoEPManifestEntry,
        restore: (saved) => {
          if (!isEntry(saved)) throw new Error(`autoep plugin: the checkpoint's plugins.autoep entry is not { preset_model, autoep_size, blocks }`);
          if (saved.preset_model !== presetName) throw new Error(`autoep plugin: the checkpoint was saved with expert_parallel.preset_model "${saved.preset_model}", this job's is "${presetName}"`);
          if (saved.autoep_size !== ep.autoep_size) ctx.log(`autoep: resuming a checkpoint saved at autoep_size ${saved.autoep_size} with autoep_size ${ep.autoep_size}: expert states are resharded by expert`);
          restoredBias = saved.expert_bias ?? null;
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
