/**
 * The MoE plugin: expert parallelism that composes with every ZeRO stage, DeepSpeed's router
 * options, placement strategies and MoE statistics (design.md; domain.md §4). Selected for every
 * sparse (`mixtral`) model (core/src/engine/plugins.ts).
 *
 * Hooks:
 * - `partition` (wrapped when ep_size > 1, so it composes with zero1/2/3): an expert unit that another rank of this
 *   rank's EP group holds plans `null` (no buffers, no optimizer state, its hooks never fire here);
 *   every other unit keeps the wrapped plan — expert units are partitioned over their edp group by
 *   the zero plugins (`groupFor`), dense units over dp. Expert and dense parameters thus sit in
 *   separate groups: expert gradients are summed over edp, dense over dp, and the optimizer divides
 *   both by accumulation × world_size (an expert's summed gradient holds the contributions of the
 *   tokens of all world_size ranks: ep_size sources per edp member).
 * - `route` (claimed): with ep_size > 1 the all_to_all_v route (ep-route.ts); the gate (gate.ts)
 *   for every sparse model — it reproduces Hugging Face's router exactly with default options.
 * - `checkpoint` (wrapped when ep_size > 1): expert states are written by the ranks of the expert's
 *   edp group (its first rank when replicated, every rank its shard when sharded), and the manifest
 *   records the placement (`moe.placement`, placement.ts `PlacementRecord`); resume with
 *   `createMoEPlugin({ manifest: manifest.moe })` — same placement when the job asks for the same
 *   strategy and ep_size; with `balanced`, a new placement from the loads the saved run measured
 *   (`moe.expert_loads`, the expert counts of every step so far, summed over dp).
 *
 * Constraints (config errors naming the numbers): num_local_experts % ep_size == 0 and
 * world_size % ep_size == 0.
 *
 * Statistics: {@link moeStateOf}(engine.env).stats — see stats.ts.
 */
import { definePlugin, type EngineEnv, type EngineHooks, type Unit } from "@zeromoe/core";
import { ExpertParallelRoute } from "./ep-route.ts";
import { TopKGate, gateOptionsFromConfig } from "./gate.ts";
import { placeExperts, placementFromRecord, placementRecord, type LayerPlacement, type PlacementRecord, type PlacementStrategy } from "./placement.ts";
import { MoEStatsRecorder, type MoEStepStats } from "./stats.ts";

export * from "./placement.ts";
export * from "./capacity.ts";
export * from "./gate.ts";
export * from "./stats.ts";
export * from "./memory.ts";
export { ExpertParallelRoute } from "./ep-route.ts";

type Hooks = EngineHooks & Record<string, unknown>;

/** What the plugin keeps per engine (read it with {@link moeStateOf}). */
export interface MoEState {
  epSize: number;
  /** Per-layer placement of experts on the ranks of the EP group. */
  placement: LayerPlacement[];
  /** The placement as recorded in the checkpoint manifest (`moe.placement`). */
  record: PlacementRecord;
  /** Statistics recorder (counts, drops, aux/z losses, dead experts). */
  stats: MoEStatsRecorder;
  /** The expert-parallel route (ep_size > 1), else null. */
  route: ExpertParallelRoute | null;
  gate: TopKGate | null;
}

const STATES = new WeakMap<object, MoEState>();

/** The MoE plugin's state of an engine (`engine.env`), or null when the plugin is not loaded. */
export function moeStateOf(env: EngineEnv): MoEState | null {
  return STATES.get(env) ?? null;
}

/** What the plugin adds to a checkpoint manifest under `moe` (checkpoint hook `manifest`). */
export interface MoEManifestEntry {
  /** Placement of the saved run. */
  placement: PlacementRecord;
  /** Expert counts per layer over every step the saved run reduced (reduceMoEStats), or null. */
  expert_loads: number[][] | null;
}

/**
 * Placement for a job resuming from a manifest entry: `balanced` with measured loads → a fresh
 * balanced placement from them (experts move; the checkpoint loader reads states by unit name);
 * otherwise the recorded placement when strategy and ep_size match; else null (place anew).
 */
export function placementForResume(entry: MoEManifestEntry, strategy: PlacementStrategy, numLayers: number, numExperts: number, epSize: number): { placement: LayerPlacement[]; loads: number[][] | null } | null {
  if (strategy === "balanced" && entry.expert_loads && entry.expert_loads.length === numLayers && entry.expert_loads.every((l) => l.length === numExperts)) {
    return { placement: placeExperts("balanced", numLayers, numExperts, epSize, entry.expert_loads), loads: entry.expert_loads };
  }
  if (entry.placement.strategy === strategy && entry.placement.ep_size === epSize) {
    return { placement: placementFromRecord(entry.placement, numLayers, numExperts, epSize), loads: entry.placement.loads };
  }
  return null;
}

/** Options of {@link createMoEPlugin}. */
export interface MoEPluginOptions {
  /** Measured per-layer, per-expert loads for `placement: "balanced"` (e.g. the counts of a previous
   * run's `--summary`). Without them `balanced` falls back to `contiguous` (and says so). */
  loads?: number[][] | null;
  /** The `moe` entry of a checkpoint manifest ({@link MoEManifestEntry}) to resume from. */
  manifest?: MoEManifestEntry | null;
}

/** Build the MoE plugin (the default export is `createMoEPlugin()`). */
export function createMoEPlugin(opts: MoEPluginOptions = {}) {
  return definePlugin<Hooks, EngineEnv>({
    name: "moe",
    configKey: "moe",
    setup(ctx) {
      const env = ctx.env;
      const cfg = env.config.moe;
      if (!cfg) throw new Error(`moe plugin: the job has no moe section (model_type "${env.config.model.model_type}" has no experts)`);
      const model = env.config.model;
      if (model.model_type !== "mixtral") throw new Error(`moe plugin: model_type "${model.model_type}" has no experts (expected "mixtral")`);
      const E = model.num_local_experts;
      const L = model.num_hidden_layers;
      const P = cfg.ep_size;
      const W = env.comm.worldSize;
      if (E % P !== 0) throw new Error(`moe.ep_size: num_local_experts ${E} is not divisible by ep_size ${P}`);
      if (W % P !== 0) throw new Error(`moe.ep_size: world_size ${W} is not divisible by ep_size ${P}`);
      if (env.groups.ep.size !== P) throw new Error(`moe plugin: the engine's EP group ${env.groups.ep.name} has ${env.groups.ep.size} ranks, moe.ep_size is ${P}`);
      let loads = opts.loads ?? null;
      const resumed = opts.manifest ? placementForResume(opts.manifest, cfg.placement, L, E, P) : null;
      let placement: LayerPlacement[];
      if (resumed) {
        placement = resumed.placement;
        loads = resumed.loads;
      } else {
        if (cfg.placement === "balanced" && !loads && P > 1) env.log(`moe: placement "balanced" has no measured loads yet; experts placed contiguously`);
        placement = placeExperts(cfg.placement, L, E, P, loads);
      }
      const record = placementRecord(cfg.placement, P, placement, loads);
      const stats = new MoEStatsRecorder(L, E, cfg.k, cfg.aux_loss, cfg.dead_expert_steps);
      const state: MoEState = { epSize: P, placement, record, stats, route: null, gate: null };
      STATES.set(env, state);
      const epRank = env.groups.ep.rank;
      const isLocal = (u: Unit): boolean => u.kind !== "expert" || placement[u.layer!]!.owner[u.expert!] === epRank;
      // with ep_size 1 every expert is local: the wrapped plan stays as it is
      if (P > 1) {
        ctx.wrap("partition", (prev) => ({ plan: (unit, e) => (isLocal(unit) ? prev.plan(unit, e) : null) }));
        ctx.wrap("checkpoint", (prev) => ({
          ...prev,
          // An expert is held only inside its edp group: when its states are replicated there
          // (not sharded), the group's first rank writes it (world rank 0 may not hold it).
          ownedUnits: (e) => {
            const dense = prev.ownedUnits(e).filter((u) => u.kind !== "expert");
            const experts = [...e.states.values()].filter((s) => s.unit.kind === "expert" && (s.plan.optim === "sharded" || s.plan.group.rank === 0)).map((s) => s.unit);
            return [...dense, ...experts];
          },
          manifest: (e) => ({ ...(prev.manifest?.(e) ?? {}), moe: { placement: state.record, expert_loads: stats.cumulativeCounts() } satisfies MoEManifestEntry }),
        }));
      }
      ctx.claim("route", {
        create: (e) => {
          if (P === 1) return null;
          state.route = new ExpertParallelRoute(e, placement);
          return state.route;
        },
        createGate: (e) => {
          state.gate = new TopKGate(gateOptionsFromConfig(cfg, model.output_router_logits), {
            phase: e.phase,
            micro: e.micro,
            rank: e.comm.rank,
            worldSize: e.comm.worldSize,
            seed: e.config.seed,
            observe: (r) => stats.observe(r),
          });
          return state.gate;
        },
      });
    },
  });
}

/**
 * One step's MoE statistics, summed over the dp group (stats.ts): EVERY rank must call it after
 * each `trainBatch` (one all_reduce). Dead-expert warnings are also logged through `env.log`.
 * Returns null when the MoE plugin is not loaded (dense model).
 */
export async function reduceMoEStats(env: EngineEnv): Promise<MoEStepStats | null> {
  const st = moeStateOf(env);
  if (!st) return null;
  const s = await st.stats.reduceStep(env.comm, env.groups.dp);
  for (const w of s.warnings) env.log(`warning: ${w}`);
  return s;
}

/** The `moe` plugin with default options. */
export const moe = createMoEPlugin();

export default moe;
