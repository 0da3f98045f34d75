/**
 * The MoE plugin: expert parallelism that composes with every ZeRO stage, DeepSpeed's router
 * options, placement strategies and MoE statistics (docs/moe.md; docs/domain.md §4). Selected for every
 * sparse (`mixtral`) model (core's registry, core/src/engine/registry.ts).
 *
 * Hooks:
 * - `partition` (wrapped when ep_size > 1, so it composes with zero1/2/3): an expert unit that another rank of this
 *   rank's EP group holds plans `null` (no buffers, no optimizer state, its hooks never fire here);
 *   every other unit keeps the wrapped plan — expert units are partitioned over their edp group by
 *   the zero plugins (`groupFor`), dense units over dp. Expert and dense parameters thus sit in
 *   separate groups: expert gradients are summed over edp, dense over dp, and the optimizer divides
 *   both by accumulation × world_size (an expert's summed gradient holds the contributions of the
 *   tokens of all world_size ranks: ep_size sources per edp member).
 * - `route` (claimed): supplies the MoE layers' token dispatcher — with ep_size > 1 the all_to_all_v
 *   dispatcher (ep-route.ts; ep_size 1 keeps core's local one) — and, for every sparse model, the
 *   router (gate.ts: DeepSpeed's options; Hugging Face's router exactly with default options).
 * - `checkpoint` (wrapped when ep_size > 1): expert states are written by the ranks of the expert's
 *   edp group (its first rank when replicated, every rank its shard when sharded).
 *
 * Through the plugin context (core/src/engine/plugin-context.ts), core knowing nothing of MoE:
 * - manifest: `ctx.checkpoint.contribute("moe", …)` (ep_size > 1) records the placement
 *   (`plugins.moe.placement`, placement.ts `PlacementRecord`) and the measured loads
 *   (`plugins.moe.expert_loads`, expert counts of every step so far, summed over dp). On resume the
 *   entry comes back to `restore` before partitioning: the same placement when the job asks for the
 *   same strategy and ep_size; with `balanced`, a new placement from the measured loads; with
 *   `co_occurrence` / `topology`, a new one from the measured co-occurrence counts
 *   (`plugins.moe.expert_pairs`, pair-stats.ts) and loads.
 *   `createMoEPlugin({ manifest })` does the same explicitly. After a load, `check` warns when the
 *   experts are placed differently from the checkpoint's.
 * - statistics: `ctx.metrics.afterStep` reduces each step's counts over dp (one all_reduce on every
 *   rank) and returns the load line and dead-expert warnings; `ctx.metrics.summary("moe")` gives the
 *   run's `moe` summary section (expert_counts, aux_loss, dropped_tokens; docs/summary.md).
 * - memory: the plugin's `memory.layout` (memory.ts `moeMemoryLayout`): a rank keeps Ψ_e/ep_size
 *   expert parameters, partitioned over its edp group of world_size/ep_size ranks.
 *
 * - live re-placement (`moe.replace_every` > 0; live-replace.ts): after every N-th step the placement is
 *   recomputed from the loads so far and the experts that change rank move in one all_to_all_v per EP
 *   group (`ctx.relocation`); the summary's `moe.replacements` and the log report each one.
 *
 * Constraints (config errors naming the numbers): num_local_experts % ep_size == 0 and
 * world_size % ep_size == 0.
 *
 * Statistics for tests and tools: {@link moeStateOf}(engine.env).stats — see stats.ts.
 */
import { definePlugin, type EngineHooks, type HookContext, type SetupContext, type UnitInfo } from "@zeromoe/core";
import { modelBufferNames, moeLayerIndices, moeShape } from "@zeromoe/core/config";
import type { CausalDecoder } from "@zeromoe/core/models";
import { expertSliceOf } from "@zeromoe/core/nn";
import { ExpertParallelDispatcher } from "./ep-route.ts";
import { TopKGate, gateOptionsFromConfig } from "./gate.ts";
import { placeExperts, placementFromRecord, placementRecord, type LayerPlacement, type PlacementRecord, type PlacementStrategy } from "./placement.ts";
import { moeMemoryLayout } from "./memory.ts";
import { installLiveReplacement, placementComputer, type LiveReplacement, type ReplacementRecord } from "./live-replace.ts";
import { assertExpertTensorParallel } from "./expert-tp.ts";
import { formatLoadLine, MoEStatsRecorder, type MoEStepStats } from "./stats.ts";
import { PairStatsRecorder, pairsFromNested, type DispatchTraffic } from "./pair-stats.ts";
import { placementInputs, type PlacementInputs } from "./placement-inputs.ts";

export * from "./placement.ts";
export * from "./capacity.ts";
export * from "./gate.ts";
export * from "./stats.ts";
export * from "./memory.ts";
export * from "./pair-stats.ts";
export * from "./co-occurrence.ts";
export * from "./graph-placement.ts";
export * from "./partition.ts";
export * from "./topology.ts";
export * from "./expert-tp.ts";
export * from "./live-replace.ts";
export { ExpertParallelDispatcher, type ExchangeRecord, type EPGroupContext } from "./ep-route.ts";

type Hooks = EngineHooks & Record<string, unknown>;

/** What the plugin keeps per engine (read it with {@link moeStateOf}). */
export interface MoEState {
  epSize: number;
  /** Per-layer placement of experts on the ranks of the EP group. */
  placement: LayerPlacement[];
  /** Co-occurrence and dispatch-traffic statistics (pair-stats.ts). */
  pairs: PairStatsRecorder;
  /** The placement as recorded in the checkpoint manifest (`moe.placement`). */
  record: PlacementRecord;
  /** Statistics recorder (counts, drops, aux/z losses, dead experts). */
  stats: MoEStatsRecorder;
  /** The expert-parallel dispatcher (ep_size > 1), else null (core's local dispatcher). */
  dispatcher: ExpertParallelDispatcher | null;
  /** The router installed into the model. */
  router: TopKGate | null;
}

/** Keyed by the engine's process groups (one object per engine, shared by its hook and setup contexts). */
const STATES = new WeakMap<object, MoEState>();

/** The MoE plugin's state of an engine (`engine.env`, or any context of it), or null when the
 * plugin is not loaded. */
export function moeStateOf(ctx: Pick<HookContext, "groups">): MoEState | null {
  return STATES.get(ctx.groups) ?? null;
}

/** The run's `moe` summary section (docs/summary.md): expert counts and dropped pairs summed over
 * every reduced step, the last step's aux loss. */
export interface MoESummarySection {
  expert_counts: number[][];
  /** step_expert_counts[s][layer][expert]: the same counts for each step of this run, in order
   * (step start_step + 1 + s), for per-step comparisons with another implementation; kept for
   * the first steps while their total stays within {@link STEP_EXPERT_COUNTS_LIMIT} numbers. */
  step_expert_counts: number[][][];
  aux_loss: number | null;
  dropped_tokens: number;
  /** Live re-placements of this run (`moe.replace_every` > 0 only; live-replace.ts). */
  replacements?: ReplacementRecord[];
  /** expert_pairs[layer][a][b]: tokens that chose both experts a and b, summed over the run and dp
   * (a dense layer's: []); pair-stats.ts. */
  expert_pairs: number[][][];
  /** The dispatch all_to_all's P×P traffic per layer (null with ep_size 1); pair-stats.ts. */
  dispatch_traffic: DispatchTraffic | null;
}

/** Most numbers (steps × layers × experts) the summary's `step_expert_counts` keeps: the first
 * steps of a run that would pass it are kept, the later ones left out (4M numbers: 50 steps of
 * 94 layers × 128 experts fit many times over; a summary stays tens of MB at most). */
export const STEP_EXPERT_COUNTS_LIMIT = 4_000_000;

/** Whether `x` looks like a {@link MoEManifestEntry} (a checkpoint's `plugins.moe`). */
function isManifestEntry(x: unknown): x is MoEManifestEntry {
  const e = x as MoEManifestEntry | null;
  return typeof e === "object" && e !== null && typeof e.placement === "object" && e.placement !== null && Array.isArray(e.placement.owner);
}

/** What the plugin adds to a checkpoint manifest under `moe` (checkpoint hook `manifest`). */
export interface MoEManifestEntry {
  /** Placement of the saved run. */
  placement: PlacementRecord;
  /** Expert counts per layer over every step the saved run reduced (reduceMoEStats), or null. */
  expert_loads: number[][] | null;
  /** Co-occurrence counts [layer][E][E] over the same steps (absent in older checkpoints). */
  expert_pairs?: number[][][] | null;
  /** moe.etp_size of the saved run when > 1 (absent: 1). */
  etp_size?: number;
}

/**
 * Placement for a job resuming from a manifest entry: `co_occurrence` / `topology` with measured
 * co-occurrence counts and loads → a fresh graph placement from them (`groups`: the EP-rank groups
 * of moe.topology); `balanced` with measured loads → a fresh
 * balanced placement from them (experts move; the checkpoint loader reads states by unit name);
 * otherwise the recorded placement when strategy and ep_size match; else null (place anew).
 */
export function placementForResume(entry: MoEManifestEntry, strategy: PlacementStrategy, numLayers: number, numExperts: number, epSize: number, groups: readonly (readonly number[])[] | null = null): { placement: LayerPlacement[]; loads: number[][] | null } | null {
  if ((strategy === "co_occurrence" || strategy === "topology") && entry.expert_pairs && entry.expert_loads) {
    const pairs = pairsFromNested(entry.expert_pairs, numLayers, numExperts, "checkpoint manifest plugins.moe.expert_pairs");
    return { placement: placeExperts(strategy, numLayers, numExperts, epSize, entry.expert_loads, { pairs, groups }), loads: entry.expert_loads };
  }
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
  return definePlugin<Hooks, SetupContext>({
    name: "moe",
    configKey: "moe",
    claims: ["route"],
    memory: { layout: moeMemoryLayout },
    setup(ctx) {
      const cfg = ctx.config.moe;
      if (!cfg) throw new Error(`moe plugin: the job has no moe section (model_type "${ctx.config.model.model_type}" has no experts)`);
      const model = ctx.config.model;
      if (model.model_type === "llama") throw new Error(`moe plugin: model_type "${model.model_type}" has no experts`);
      const E = model.num_local_experts;
      const L = model.num_hidden_layers;
      const P = cfg.ep_size;
      const W = ctx.worldSize;
      if (E % P !== 0) throw new Error(`moe.ep_size: num_local_experts ${E} is not divisible by ep_size ${P}`);
      if (W % P !== 0) throw new Error(`moe.ep_size: world_size ${W} is not divisible by ep_size ${P}`);
      const T = cfg.etp_size ?? 1;
      assertExpertTensorParallel({ worldSize: W, epSize: P, etpSize: T, intermediate: moeShape(model)?.expertIntermediate ?? 0 });
      if (ctx.groups.etp.size !== T) throw new Error(`moe plugin: the engine's etp group ${ctx.groups.etp.name} has ${ctx.groups.etp.size} ranks, moe.etp_size is ${T}`);
      if (ctx.groups.ep.size !== P) throw new Error(`moe plugin: the engine's EP group ${ctx.groups.ep.name} has ${ctx.groups.ep.size} ranks, moe.ep_size is ${P}`);
      // a sparse family's dense layers (mlp_only_layers, first_k_dense_replace) get no statistics
      const moeLayers = moeLayerIndices(model);
      const stats = new MoEStatsRecorder(L, E, cfg.k, cfg.aux_loss, cfg.dead_expert_steps, moeLayers);
      const pairStats = new PairStatsRecorder(L, E, P, moeLayers);
      // moe.topology / moe.routing_log are read now, so a bad file stops the job before training
      const inputs: PlacementInputs = placementInputs(cfg, W, P, L, E);
      const state: MoEState = { epSize: P, placement: [], pairs: pairStats, record: placementRecord(cfg.placement, P, [], null), stats, dispatcher: null, router: null };
      STATES.set(ctx.groups, state);
      // the placement is decided once every plugin is set up and a resumed job's manifest entry has
      // come back (restore), before the engine partitions the units
      let resumeEntry: MoEManifestEntry | null = opts.manifest ?? null;
      let placed = false;
      // a resumed re-placing job's loads before the checkpoint (manifest expert_loads), else null
      let liveBase: number[][] | null = null;
      /** Loads of the whole run for live re-placement: the resumed job's saved loads plus this run's counts. */
      const runLoads = (): number[][] | null => {
        const now = stats.cumulativeCounts();
        if (!liveBase) return now;
        return liveBase.map((row, l) => row.map((c, e) => c + (now?.[l]?.[e] ?? 0)));
      };
      /** Pair counts of the whole run for live re-placement (flattened E×E per layer): the resumed
       * job's saved counts plus this run's. */
      let pairBase: (Float64Array | undefined)[] | null = null;
      const runPairs = (): (Float64Array | undefined)[] => pairStats.totals.pairs.map((p, l) => {
        const b = pairBase?.[l];
        return b ? p.map((x, i) => x + b[i]!) : p;
      });
      const runPairsNested = (): number[][][] => {
        const isMoe = new Set(moeLayers);
        return runPairs().map((p, l) => (isMoe.has(l) && p ? Array.from({ length: E }, (_, a) => Array.from(p.subarray(a * E, (a + 1) * E))) : []));
      };
      const place = (): void => {
        if (placed) return;
        placed = true;
        let loads = opts.loads ?? inputs.loads;
        // a re-placing job (moe.replace_every) resumes with the placement it had and carries on
        // from the loads (and pair counts) it measured, as if it had not stopped (live-replace.ts)
        const keep = resumeEntry && cfg.replace_every > 0 && resumeEntry.placement.strategy === cfg.placement && resumeEntry.placement.ep_size === P;
        if (keep && resumeEntry!.expert_loads && resumeEntry!.expert_loads.length === L) liveBase = resumeEntry!.expert_loads;
        if (keep && resumeEntry!.expert_pairs) pairBase = pairsFromNested(resumeEntry!.expert_pairs, L, E, "checkpoint manifest plugins.moe.expert_pairs");
        const resumed = keep ? { placement: placementFromRecord(resumeEntry!.placement, L, E, P), loads: resumeEntry!.placement.loads } : resumeEntry ? placementForResume(resumeEntry, cfg.placement, L, E, P, inputs.groups) : null;
        if (resumed) {
          state.placement = resumed.placement;
          loads = resumed.loads;
        } else {
          if (cfg.placement === "balanced" && !loads && P > 1) ctx.log(`moe: placement "balanced" has no measured loads yet; experts placed contiguously`);
          if ((cfg.placement === "co_occurrence" || cfg.placement === "topology") && !inputs.pairs && P > 1) ctx.log(`moe: placement "${cfg.placement}" has no routing statistics yet (resume from a checkpoint of a warm-up run, or set moe.routing_log); experts placed by load${loads ? "" : " (none measured: contiguously)"}`);
          state.placement = placeExperts(cfg.placement, L, E, P, loads, { pairs: inputs.pairs, groups: inputs.groups });
        }
        state.record = placementRecord(cfg.placement, P, state.placement, loads);
        pairStats.setPlacement(state.placement.map((p) => p.owner), ctx.groups.ep.rank);
      };
      ctx.transformModel(place);
      const epRank = ctx.groups.ep.rank;
      const etpRank = ctx.groups.etp.rank;
      // an expert unit is held by the ranks its placement names and, under expert TP, only as this rank's slice
      const isLocal = (u: UnitInfo): boolean => u.kind !== "expert" || (state.placement[u.layer!]!.owner[u.expert!] === epRank && (T === 1 || expertSliceOf(u.name) === etpRank));
      // with ep_size 1 and etp_size 1 every expert is local: the wrapped plan stays as it is
      if (P > 1 || T > 1) {
        ctx.wrap("partition", (prev) => ({
          plan: (unit, hc) => {
            place();
            return isLocal(unit) ? prev.plan(unit, hc) : null;
          },
        }));
      }
      // expert states (whole experts or etp slices, each slice its own unit) are written inside their edp group
      if (P > 1 || T > 1) {
        ctx.wrap("checkpoint", (prev) => ({
          ...prev,
          // An expert is held only inside its edp group: when its states are replicated there
          // (not sharded), the group's first rank writes it (world rank 0 may not hold it).
          ownedUnits: (hc) => {
            const dense = prev.ownedUnits(hc).filter((u) => u.kind !== "expert");
            const experts = hc.units().filter((u) => u.kind === "expert" && (u.plan.optim === "sharded" || u.group.rank === 0));
            return [...dense, ...experts];
          },
        }));
        ctx.checkpoint.contribute("moe", {
          save: () => ({ placement: state.record, expert_loads: cfg.replace_every > 0 ? runLoads() : stats.cumulativeCounts(), expert_pairs: stats.cumulativeCounts() ? (cfg.replace_every > 0 ? runPairsNested() : pairStats.pairMatrices()) : null , ...(T > 1 ? { etp_size: T } : {}) }) satisfies MoEManifestEntry,
          restore: (saved) => {
            if (!isManifestEntry(saved)) throw new Error(`moe plugin: the checkpoint's plugins.moe entry is not a placement record (expected { placement: { owner: [...] }, expert_loads })`);
            const savedT = saved.etp_size ?? 1;
            if (savedT !== T) throw new Error(`moe.etp_size: the checkpoint was saved with etp_size ${savedT}, the job has ${T}; expert slices are not resharded across etp sizes (resume with --set moe.etp_size=${savedT})`);
            if (!opts.manifest) resumeEntry = saved;
          },
          check: (saved) => {
            if (!isManifestEntry(saved) || saved.placement.ep_size !== P) return null;
            if (JSON.stringify(saved.placement.owner) === JSON.stringify(state.record.owner)) return null;
            return `the expert placement differs from the checkpoint's (plugins.moe.placement); parameters are loaded by expert, so training is unaffected, but experts now live on other ranks (resume the job with --resume, or create the moe plugin with createMoEPlugin({ manifest }), to keep it)`;
          },
        });
      }
      // the model's buffers (DeepSeek-V3's e_score_correction_bias): not trained, so not in the
      // units' states — saved in the manifest (`plugins.model_buffers`), given back on --resume
      if (modelBufferNames(model).length > 0) {
        let target: CausalDecoder | null = null;
        let saved: Record<string, number[]> | null = null;
        const apply = (): void => {
          if (!target || !saved) return;
          for (const [name, arr] of target.buffers()) {
            const v = saved[name];
            if (!v) continue;
            if (v.length !== arr.length) throw new Error(`moe plugin: the checkpoint's model_buffers.${name} has ${v.length} values, the model's has ${arr.length}`);
            arr.set(v);
          }
        };
        ctx.transformModel((m) => {
          target = m;
          apply();
        });
        ctx.checkpoint.contribute("model_buffers", {
          save: () => Object.fromEntries([...(target?.buffers() ?? new Map<string, Float32Array>())].map(([n, b]) => [n, Array.from(b)])),
          restore: (s) => {
            if (typeof s !== "object" || s === null || Array.isArray(s)) throw new Error(`moe plugin: the checkpoint's plugins.model_buffers is not an object of arrays`);
            saved = s as Record<string, number[]>;
            apply();
          },
        });
      }
      // statistics: reduced over dp after every step (a collective on every rank), totals for the summary
      // summary rows by layer; a dense layer's row is empty (it has no experts)
      const counts = Array.from({ length: L }, (_, l) => new Array<number>(moeLayers.includes(l) ? E : 0).fill(0));
      let dropped = 0;
      let last: MoEStepStats | null = null;
      const perStep: number[][][] = [];
      let perStepNumbers = 0;
      ctx.metrics.afterStep(async () => {
        const s = await stats.reduceStep(ctx.comm, ctx.groups.dp);
        await pairStats.reduceStep(ctx.comm, ctx.groups.dp);
        const stepRows = counts.map(() => [] as number[]);
        for (const l of s.layers) {
          const row = counts[l.layer];
          if (!row || row.length !== l.counts.length) throw new Error(`moe plugin: statistics of layer ${l.layer} have ${l.counts.length} experts; the model has ${L} layers of ${E}`);
          l.counts.forEach((c, e) => (row[e]! += c));
          dropped += l.dropped;
          stepRows[l.layer] = [...l.counts];
        }
        last = s;
        if (perStepNumbers + moeLayers.length * E <= STEP_EXPERT_COUNTS_LIMIT) {
          perStep.push(stepRows);
          perStepNumbers += moeLayers.length * E;
        }
        return { line: formatLoadLine(s), warnings: s.warnings };
      });
      // live re-placement (live-replace.ts): after the statistics of the step are reduced, so the
      // loads it places by include that step (as a checkpoint saved after it records them)
      let live: LiveReplacement | null = null;
      if (cfg.replace_every > 0) {
        const compute = placementComputer(cfg.placement);
        if (!compute) throw new Error(`moe.replace_every: placement "${cfg.placement}" cannot change during training (use "balanced")`);
        if (P < 2) throw new Error(`moe.replace_every: needs moe.ep_size ≥ 2, got ${P}`);
        live = installLiveReplacement(ctx, {
          every: cfg.replace_every,
          compute,
          placement: () => state.placement,
          numLayers: L,
          numExperts: E,
          loads: runLoads,
          graph: () => ({ pairs: runPairs(), groups: inputs.groups }),
          onChange: (p) => {
            state.record = placementRecord(cfg.placement, P, p, runLoads());
            pairStats.setPlacement(p.map((x) => x.owner), ctx.groups.ep.rank);
          },
        });
      }
      ctx.metrics.summary("moe", (): MoESummarySection => ({ expert_counts: counts.map((r) => [...r]), step_expert_counts: perStep, aux_loss: last?.auxLoss ?? null, dropped_tokens: dropped, expert_pairs: pairStats.pairMatrices(), dispatch_traffic: pairStats.trafficSection(), ...(live ? { replacements: live.records.map((r) => ({ ...r })) } : {}) }));
      ctx.claim("route", {
        dispatcher: (hc) => {
          if (P === 1 && T === 1) return null;
          state.dispatcher = new ExpertParallelDispatcher({ comm: hc.comm, ep: hc.groups.ep, etp: hc.groups.etp }, state.placement);
          return state.dispatcher;
        },
        router: (hc) => {
          state.router = new TopKGate(gateOptionsFromConfig(cfg, model.output_router_logits), {
            phase: hc.phase,
            micro: hc.micro,
            rank: hc.comm.rank,
            worldSize: hc.comm.worldSize,
            seed: hc.config.seed,
            observe: (r) => {
              stats.observe(r);
              if (r.indices) pairStats.observe(r.layer, r.indices, r.tokens, cfg.k, r.kept);
            },
          });
          return state.router;
        },
      });
    },
  });
}

/**
 * One step's MoE statistics, summed over the dp group (stats.ts), for an engine driven without the
 * trainer (tests, benchmarks): EVERY rank must call it after each `trainBatch` (one all_reduce),
 * INSTEAD of `engine.afterStep()` (which reduces the same recorder). Dead-expert warnings are
 * logged through `ctx.warn`. Returns null when the MoE plugin is not loaded (dense model).
 */
export async function reduceMoEStats(ctx: Pick<HookContext, "groups" | "comm" | "warn">): Promise<MoEStepStats | null> {
  const st = moeStateOf(ctx);
  if (!st) return null;
  const s = await st.stats.reduceStep(ctx.comm, ctx.groups.dp);
  await st.pairs.reduceStep(ctx.comm, ctx.groups.dp);
  for (const w of s.warnings) ctx.warn(w);
  return s;
}

/** The `moe` plugin with default options. */
export const moe = createMoEPlugin();

export default moe;
