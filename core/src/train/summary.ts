/**
 * The `--summary out.json` file of `bun run train` (documented in docs/summary.md): what each rank
 * reports at the end of a run ({@link RankReport}), how the reports become one
 * {@link TrainSummary}, and a structural check of a summary ({@link checkSummary}) for tests and
 * for tools that read these files. All sizes are bytes, all times seconds.
 */

import type { CommsRecord } from "../observe/comms-logger.ts";
import type { FlopsProfile } from "../observe/flops-profiler.ts";
import type { HistoryEntry, ObserveReport } from "../observe/observer.ts";
import type { Phase } from "../observe/phase-timer.ts";

/** Memory of one rank after the last step, bytes. `padding` is the engine's shard padding
 * (`engine.paddingBytes()`, already inside params/grads/optim); `peak_total` is the run's peak
 * of the sum over all tags. */
export interface RankMemory {
  rank: number;
  params: number;
  grads: number;
  optim: number;
  gathered: number;
  activation: number;
  comm: number;
  /** Buffers tagged "other" (scratch, verification); not in the design's list, reported anyway. */
  other: number;
  padding: number;
  peak_total: number;
  /** The run's peak of each tag on its own (the tags peak at different moments, so these need
   * not add up to `peak_total`). */
  peak_by_tag: Record<string, number>;
}

/** Bytes one rank sent per collective over the whole run (nominal ring bytes, comm/stats.ts). */
export interface RankComm {
  rank: number;
  all_gather: number;
  reduce_scatter: number;
  all_reduce: number;
  all_to_all: number;
  broadcast: number;
}

/** MoE load statistics of the run: the `moe` section the MoE plugin contributes
 * (`ctx.metrics.summary("moe", …)`); null when no plugin does (dense models). */
export interface MoeSummary {
  /** expert_counts[layer][expert]: routing choices (flattened tokens·k) over every training
   * micro-batch of the run, summed over the data-parallel group; a dense layer of a sparse family
   * has an empty row. */
  expert_counts: number[][];
  /** step_expert_counts[s][layer][expert]: the same counts for each step of this run (step
   * start_step + 1 + s), the first steps while steps × layers × experts ≤ 4,000,000. */
  step_expert_counts: number[][][];
  /** Load-balancing loss (before its coefficient) of the last step, mean over micro-batches and ranks. */
  aux_loss: number | null;
  /** Tokens dropped for capacity over the run (0: Mixtral routing has no capacity limit). */
  dropped_tokens: number;
  /** expert_pairs[layer][a][b]: tokens that chose both experts a and b, over the run and the dp
   * group (a dense layer: []); absent in older summaries. */
  expert_pairs?: number[][][];
  /** Dispatch all_to_all traffic per layer (P×P rows and token copies, row = source EP rank);
   * null with ep_size 1; absent in older summaries. */
  dispatch_traffic?: { ep_size: number; layers: { layer: number; rows: number[][]; copies: number[][]; cross_rank_rows: number; cross_rank_copies: number }[] } | null;
}

/** What one rank returns from its entry at the end of a run. */
export interface RankReport {
  rank: number;
  backend: { name: string; adapter: string; reason: string };
  numParameters: number;
  /** Steps done before this run (resumed from a checkpoint), else 0. */
  startStep: number;
  /** Checkpoint tag directories this run saved, oldest first. */
  checkpoints: string[];
  /** The signal the ranks agreed to stop on after a SIGINT/SIGTERM (2, 15), else 0 (loop.ts). */
  stopSignal?: number;
  /** Mean training loss of each step over all ranks (the same list on every rank). */
  losses: number[];
  /** Wall time of each `trainBatch`, seconds (evaluation excluded). */
  stepSeconds: number[];
  /** Latest validation loss over all ranks; null when no evaluation ran. */
  valLoss: number | null;
  /** Global tokens per optimizer step (train_batch_size × seq_len). */
  tokensPerStep: number;
  memory: RankMemory;
  comm: RankComm;
  /** Summary sections the plugins contribute (`ctx.metrics.summary(section, …)`), by name. */
  sections: Record<string, unknown>;
  /** History, breakdown, comms table, FLOPs profile, monitor files (core/src/observe/observer.ts). */
  observe?: ObserveReport;
}

/** The summary file; see docs/summary.md. */
export interface TrainSummary {
  world_size: number;
  /** Steps run by this run (steps start_step+1 … start_step+steps of the training). */
  steps: number;
  /** Steps done before this run: the global step of the checkpoint it resumed from, else 0. */
  start_step: number;
  num_parameters: number;
  losses: number[];
  final_loss: number | null;
  val_loss: number | null;
  /** Global training tokens per second over all steps (step wall time of rank 0, evaluation excluded). */
  tokens_per_second: number;
  backend: { name: string; adapter: string };
  memory: { per_rank: RankMemory[] };
  comm: { per_rank: RankComm[] };
  /** The plugin-contributed `moe` section; null when no plugin contributes it (a dense model). */
  moe: MoeSummary | null;
  /** Tag directories of the checkpoints this run saved, oldest first (empty without checkpoint.dir). */
  checkpoints: string[];
  /** Rank 0's figures at every logged step (docs/summary.md, field `history`). */
  history: HistoryEntry[];
  /** The learning rate of every step of this run, in step order (docs/summary.md, field `lrs`). */
  lrs: number[];
  /** Every evaluation of the run: step and validation loss. */
  eval_history: { step: number; val_loss: number }[];
  /** wall_clock_breakdown: each rank's run totals by phase, ms; null when off. */
  wall_clock: { per_rank: { rank: number; step_ms: number; phases_ms: Record<Phase, number> }[] } | null;
  /** comms_logger: each rank's table by op and message size; null when off. */
  comms: { per_rank: { rank: number; ops: CommsRecord[] }[] } | null;
  /** flops_profiler: rank 0's profile of profile_step; null when off or not reached. */
  flops_profile: FlopsProfile | null;
  /** Files the csv_monitor and tensorboard monitors wrote (rank 0). */
  monitor_files: string[];
  /** Further plugin-contributed sections (rank 0's), by name. */
  [section: string]: unknown;
}

/**
 * One summary from every rank's report (in rank order).
 * @throws Error when `reports` is empty.
 */
export function buildSummary(reports: readonly RankReport[]): TrainSummary {
  const r0 = reports[0];
  if (!r0) throw new Error("buildSummary: no rank reports");
  const seconds = r0.stepSeconds.reduce((a, b) => a + b, 0);
  const steps = r0.losses.length;
  return {
    world_size: reports.length,
    steps,
    start_step: r0.startStep,
    num_parameters: r0.numParameters,
    losses: r0.losses,
    final_loss: steps > 0 ? r0.losses[steps - 1]! : null,
    val_loss: r0.valLoss,
    tokens_per_second: seconds > 0 ? (steps * r0.tokensPerStep) / seconds : 0,
    backend: { name: r0.backend.name, adapter: r0.backend.adapter },
    memory: { per_rank: reports.map((r) => r.memory) },
    comm: { per_rank: reports.map((r) => r.comm) },
    moe: null,
    checkpoints: r0.checkpoints,
    history: r0.observe?.history ?? [],
    lrs: r0.observe?.lrs ?? [],
    eval_history: r0.observe?.evals ?? [],
    wall_clock: r0.observe?.wallClock ? { per_rank: reports.map((r) => ({ rank: r.rank, ...r.observe!.wallClock! })) } : null,
    comms: r0.observe?.comms ? { per_rank: reports.map((r) => ({ rank: r.rank, ops: r.observe!.comms! })) } : null,
    flops_profile: r0.observe?.flops ?? null,
    monitor_files: r0.observe?.monitorFiles ?? [],
    // plugin sections (rank 0's) fill `moe` in place or add their own keys; none replaces a core field
    ...Object.fromEntries(Object.entries(r0.sections ?? {}).filter(([k]) => !CORE_SUMMARY_KEYS.has(k))),
  };
}

/** Top-level keys of the summary that core fills (a plugin section cannot replace them). */
const CORE_SUMMARY_KEYS = new Set(["world_size", "steps", "start_step", "num_parameters", "losses", "final_loss", "val_loss", "tokens_per_second", "backend", "memory", "comm", "checkpoints", "history", "lrs", "eval_history", "wall_clock", "comms", "flops_profile", "monitor_files"]);

const MEMORY_KEYS = ["params", "grads", "optim", "gathered", "activation", "comm", "padding", "peak_total"] as const;
const COMM_KEYS = ["all_gather", "reduce_scatter", "all_reduce", "all_to_all", "broadcast"] as const;

/**
 * Structural check of a parsed summary file: every field of docs/summary.md present with its type,
 * sizes non-negative, per-rank lists of length world_size in rank order, losses of length steps,
 * expert_counts rectangular. Returns the problems found (empty when valid), each naming the field.
 */
export function checkSummary(x: unknown): string[] {
  const bad: string[] = [];
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  const num = (v: unknown, path: string, nullable = false): void => {
    if (nullable && v === null) return;
    if (typeof v !== "number" || !Number.isFinite(v)) bad.push(`${path}: expected a finite number${nullable ? " or null" : ""}, got ${JSON.stringify(v)}`);
  };
  const size = (v: unknown, path: string): void => {
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) bad.push(`${path}: expected a size in bytes (number ≥ 0), got ${JSON.stringify(v)}`);
  };
  if (!isObj(x)) return ["(root): expected an object"];
  const ws = x.world_size;
  if (typeof ws !== "number" || !Number.isInteger(ws) || ws < 1) bad.push(`world_size: expected an integer ≥ 1, got ${JSON.stringify(ws)}`);
  const steps = x.steps;
  if (typeof steps !== "number" || !Number.isInteger(steps) || steps < 0) bad.push(`steps: expected an integer ≥ 0, got ${JSON.stringify(steps)}`);
  if (typeof x.start_step !== "number" || !Number.isInteger(x.start_step) || x.start_step < 0) bad.push(`start_step: expected an integer ≥ 0, got ${JSON.stringify(x.start_step)}`);
  if (!Array.isArray(x.checkpoints) || !x.checkpoints.every((c) => typeof c === "string")) bad.push("checkpoints: expected an array of strings (tag directories)");
  if (typeof x.num_parameters !== "number" || !Number.isInteger(x.num_parameters) || x.num_parameters < 1) bad.push(`num_parameters: expected an integer ≥ 1, got ${JSON.stringify(x.num_parameters)}`);
  if (x.lrs !== undefined) {
    if (!Array.isArray(x.lrs) || !x.lrs.every((v: unknown) => typeof v === "number" && Number.isFinite(v))) bad.push("lrs: expected an array of numbers");
    else if (typeof steps === "number" && x.lrs.length > steps) bad.push(`lrs: ${x.lrs.length} entries, more than steps ${steps}`);
  }
  if (!Array.isArray(x.losses)) bad.push("losses: expected an array");
  else {
    x.losses.forEach((v, i) => num(v, `losses[${i}]`));
    if (typeof steps === "number" && x.losses.length !== steps) bad.push(`losses: expected ${steps} entries (steps), got ${x.losses.length}`);
  }
  num(x.final_loss, "final_loss", true);
  num(x.val_loss, "val_loss", true);
  size(x.tokens_per_second, "tokens_per_second");
  if (!isObj(x.backend) || typeof x.backend.name !== "string" || typeof x.backend.adapter !== "string") bad.push("backend: expected {name: string, adapter: string}");
  const perRank = (section: string, keys: readonly string[]): void => {
    const s = x[section];
    if (!isObj(s) || !Array.isArray(s.per_rank)) {
      bad.push(`${section}.per_rank: expected an array`);
      return;
    }
    if (typeof ws === "number" && s.per_rank.length !== ws) bad.push(`${section}.per_rank: expected ${ws} entries (world_size), got ${s.per_rank.length}`);
    s.per_rank.forEach((r: unknown, i: number) => {
      if (!isObj(r)) {
        bad.push(`${section}.per_rank[${i}]: expected an object`);
        return;
      }
      if (r.rank !== i) bad.push(`${section}.per_rank[${i}].rank: expected ${i}, got ${JSON.stringify(r.rank)}`);
      for (const k of keys) size(r[k], `${section}.per_rank[${i}].${k}`);
    });
  };
  perRank("memory", MEMORY_KEYS);
  perRank("comm", COMM_KEYS);
  if (x.moe !== null) {
    if (!isObj(x.moe)) bad.push("moe: expected an object or null");
    else {
      const ec = x.moe.expert_counts;
      if (!Array.isArray(ec) || ec.length === 0 || !ec.every(Array.isArray)) bad.push("moe.expert_counts: expected a non-empty array of arrays [layer][expert]");
      else {
        // a sparse family's dense layer (mlp_only_layers, first_k_dense_replace) has an empty row
        const E = Math.max(...ec.map((row: unknown[]) => row.length));
        if (E === 0) bad.push("moe.expert_counts: every row is empty (no layer with experts)");
        ec.forEach((row: unknown[], l) => {
          if (row.length !== E && row.length !== 0) bad.push(`moe.expert_counts[${l}]: expected ${E} experts (or none: a dense layer), got ${row.length}`);
          row.forEach((v, e) => {
            if (typeof v !== "number" || !Number.isInteger(v) || v < 0) bad.push(`moe.expert_counts[${l}][${e}]: expected a count (integer ≥ 0), got ${JSON.stringify(v)}`);
          });
        });
      }
      // absent in summaries written before the field existed: those still read (and plot)
      const sc = x.moe.step_expert_counts;
      if (sc === undefined) {
        // nothing to check
      } else if (!Array.isArray(sc)) bad.push("moe.step_expert_counts: expected an array [step][layer][expert]");
      else if (Array.isArray(ec)) {
        if (typeof steps === "number" && sc.length > steps) bad.push(`moe.step_expert_counts: ${sc.length} steps, more than steps ${steps}`);
        sc.forEach((st: unknown, s) => {
          if (!Array.isArray(st) || st.length !== ec.length || !st.every((row, l) => Array.isArray(row) && row.length === (ec[l] as unknown[]).length && row.every((v) => Number.isInteger(v) && v >= 0))) {
            bad.push(`moe.step_expert_counts[${s}]: expected ${ec.length} layers of counts shaped as moe.expert_counts`);
          }
        });
      }
      num(x.moe.aux_loss, "moe.aux_loss", true);
      size(x.moe.dropped_tokens, "moe.dropped_tokens");
    }
  }
  return bad;
}
