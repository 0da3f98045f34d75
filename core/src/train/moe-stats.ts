/**
 * MoE load statistics of a run, from the moe plugin's recorder (plugins/moe/src/stats.ts): its
 * gate records every training forward (pre-drop expert picks, dropped (token, slot) pairs, aux
 * loss; evaluation and checkpoint recomputations are not counted); after every optimizer step each
 * rank calls `reduceStep`, one all_reduce over the dp group (domain.md §4: counts are summed over
 * the data-parallel group before anyone reads them). This file keeps the run's totals for the
 * summary and the latest step for the log.
 *
 * Core never imports plugin code statically (design.md: arrows point down), so the plugin module
 * is loaded by path at run time — the same module instance the engine's plugin loader imported
 * (core/src/engine/plugins.ts) — and used through the structural types below.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Communicator, Group } from "../comm/communicator.ts";
import type { Engine } from "../engine/engine.ts";
import { BUILTIN_PLUGINS } from "../engine/plugins.ts";
import type { MoeSummary } from "./summary.ts";

/** What the trainer reads of one step's statistics (the plugin's `MoEStepStats`). */
export interface MoEStepLike {
  /** Per MoE layer: pre-drop picks per expert and dropped pairs, summed over the dp group. */
  layers: readonly { counts: readonly number[]; dropped: number }[];
  /** Unweighted aux loss of the step (mean over micro-batches and ranks), or null. */
  auxLoss: number | null;
  /** Dead-expert warnings raised this step. */
  warnings: readonly string[];
}

/** The parts of the moe plugin module the trainer uses. */
interface MoEPluginModule {
  moeStateOf(env: unknown): { stats: { reduceStep(comm: Communicator, group: Group): Promise<MoEStepLike> } } | null;
  formatLoadLine(s: MoEStepLike): string;
}

const REPO_ROOT = resolve(import.meta.dir, "../../..");

/** Run totals over the plugin's per-step statistics (see the module comment). */
export class MoERunStats {
  private readonly counts: number[][];
  private dropped = 0;
  private last: MoEStepLike | null = null;

  private constructor(
    private readonly recorder: { reduceStep(comm: Communicator, group: Group): Promise<MoEStepLike> },
    private readonly mod: MoEPluginModule,
    private readonly comm: Communicator,
    private readonly group: Group,
    layers: number,
    experts: number,
  ) {
    this.counts = Array.from({ length: layers }, () => new Array<number>(experts).fill(0));
  }

  /** The statistics of `engine` when the moe plugin is loaded (every sparse model), else null. */
  static async attach(engine: Engine): Promise<MoERunStats | null> {
    if (!engine.env.config.moe) return null;
    const mod = (await import(pathToFileURL(resolve(REPO_ROOT, BUILTIN_PLUGINS.moe!)).href)) as Partial<MoEPluginModule>;
    const state = typeof mod.moeStateOf === "function" ? mod.moeStateOf(engine.env) : null;
    if (!state || typeof mod.formatLoadLine !== "function") return null;
    const m = engine.env.config.model;
    const experts = m.model_type === "mixtral" ? m.num_local_experts : 0;
    return new MoERunStats(state.stats, mod as MoEPluginModule, engine.env.comm, engine.env.groups.dp, m.num_hidden_layers, experts);
  }

  /** Reduce the step that just ran and add it to the totals. A collective over the dp group:
   * every rank calls it after every trainBatch. */
  async afterStep(): Promise<MoEStepLike> {
    const s = await this.recorder.reduceStep(this.comm, this.group);
    s.layers.forEach((l, i) => {
      const row = this.counts[i];
      if (!row || row.length !== l.counts.length) throw new Error(`train: the moe plugin reported layer ${i} with ${l.counts.length} experts; the model has ${this.counts.length} layers of ${this.counts[0]?.length ?? 0}`);
      l.counts.forEach((c, e) => (row[e]! += c));
      this.dropped += l.dropped;
    });
    this.last = s;
    return s;
  }

  /** The plugin's one-line load summary of the latest step (`moe L0 min/max cv… | … | drop n aux x`),
   * or null before the first step. */
  lastLine(): string | null {
    return this.last ? this.mod.formatLoadLine(this.last) : null;
  }

  /** The summary's `moe` section: counts and dropped pairs summed over the run, the last step's aux loss. */
  summary(): MoeSummary {
    return { expert_counts: this.counts.map((r) => [...r]), aux_loss: this.last?.auxLoss ?? null, dropped_tokens: this.dropped };
  }
}
