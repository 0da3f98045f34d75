/**
 * MoE statistics of a training run (what the trainer prints in its periodic log line and in the
 * `--summary` `moe` section):
 *
 * - expert counts per layer: histogram over the flattened top-k choices (before capacity drops),
 *   summed over the step's micro-batches and over the data-parallel group (docs/domain.md §4: "summed
 *   over the data-parallel group before anyone reads it"), so Σ_e counts = tokens × k per layer and
 *   every rank holds the same numbers;
 * - dropped (token, slot) pairs per layer (capacity), summed likewise;
 * - aux loss (unweighted; the configured type: Switch/GShard per layer averaged over layers, or
 *   Hugging Face's all-layer Mixtral formula) and router z-loss, averaged over micro-batches and
 *   ranks;
 * - per layer: min, max, coefficient of variation (population std / mean) of the counts and the
 *   number of dead experts (count 0 this step); a warning when an expert received no tokens for
 *   `dead_expert_steps` consecutive steps (once, until it receives tokens again).
 *
 * Use: the gate calls {@link MoEStatsRecorder.observe} on every training forward; after each
 * optimizer step EVERY rank calls {@link MoEStatsRecorder.reduceStep} (one all_reduce over dp).
 */
import type { Communicator, Group } from "@zeromoe/core";
import { flushDeferredReads } from "@zeromoe/core/nn";
import type { GateRecord } from "./gate.ts";

/** Per-layer statistics of one step (identical on every rank). */
export interface MoELayerStats {
  layer: number;
  /** Pre-drop picks per expert, summed over micro-batches and ranks. */
  counts: number[];
  /** Tokens routed through the layer (all micro-batches, all ranks). */
  tokens: number;
  /** Dropped (token, slot) pairs. */
  dropped: number;
  min: number;
  max: number;
  /** Coefficient of variation of the counts (population std / mean); 0 when all are equal. */
  cv: number;
  /** Experts with count 0 this step. */
  dead: number;
}

/** One step's MoE statistics (identical on every rank). */
export interface MoEStepStats {
  step: number;
  layers: MoELayerStats[];
  /** Mean unweighted aux loss (null when none was computed). */
  auxLoss: number | null;
  /** Mean unweighted router z-loss (null when z_loss_coef is 0). */
  zLoss: number | null;
  /** Warnings raised this step (dead experts). */
  warnings: string[];
}

/** Accumulates gate records of a step and reduces them over the dp group. */
export class MoEStatsRecorder {
  readonly numLayers: number;
  readonly numExperts: number;
  readonly k: number;
  readonly auxType: "switch" | "gshard" | "mixtral";
  readonly deadExpertSteps: number;
  /** The layers with experts, ascending (a sparse family's dense layers — qwen3_moe
   * mlp_only_layers, DeepSeek first_k_dense_replace — have no statistics, no dead-expert warnings
   * and no row of the load line). */
  readonly moeLayers: readonly number[];
  private readonly isMoe: Uint8Array;
  private counts: Float64Array;
  private dropped: Float64Array;
  private tokens: Float64Array;
  private auxSum = 0;
  private auxN = 0;
  private zSum = 0;
  private zN = 0;
  /** Current forward's records (for the all-layer Mixtral aux formula). */
  private fwd: GateRecord[] = [];
  /** Consecutive steps each (layer, expert) received no tokens. */
  private readonly idle: Int32Array;
  private steps = 0;
  /** The run's totals over every reduced step (for the `--summary` section). */
  readonly totals: MoERunTotals;
  /** The latest step's statistics, or null before the first. */
  last: MoEStepStats | null = null;

  /** @param moeLayers the layers with experts (default: every layer) */
  constructor(numLayers: number, numExperts: number, k: number, auxType: "switch" | "gshard" | "mixtral", deadExpertSteps: number, moeLayers?: readonly number[]) {
    this.numLayers = numLayers;
    this.moeLayers = moeLayers ? [...moeLayers].sort((a, b) => a - b) : Array.from({ length: numLayers }, (_, l) => l);
    this.isMoe = new Uint8Array(numLayers);
    for (const l of this.moeLayers) {
      if (!Number.isInteger(l) || l < 0 || l >= numLayers) throw new Error(`MoEStatsRecorder: MoE layer ${l} is outside 0..${numLayers - 1}`);
      this.isMoe[l] = 1;
    }
    this.numExperts = numExperts;
    this.k = k;
    this.auxType = auxType;
    this.deadExpertSteps = deadExpertSteps;
    this.counts = new Float64Array(numLayers * numExperts);
    this.dropped = new Float64Array(numLayers);
    this.tokens = new Float64Array(numLayers);
    this.idle = new Int32Array(numLayers * numExperts);
    this.totals = {
      steps: 0,
      layers: [...this.moeLayers],
      counts: Array.from({ length: numLayers }, () => new Array<number>(numExperts).fill(0)),
      tokens: new Array<number>(numLayers).fill(0),
      dropped: new Array<number>(numLayers).fill(0),
      auxSum: 0,
      auxSteps: 0,
      zSum: 0,
      zSteps: 0,
      warnings: [],
    };
  }

  /** Record one layer of one training forward (called by the gate). */
  observe(rec: GateRecord): void {
    const E = this.numExperts;
    const l = rec.layer;
    if (this.isMoe[l] !== 1) throw new Error(`MoEStatsRecorder: layer ${l} has no experts (MoE layers: ${this.moeLayers.join(", ")})`);
    const nMoe = this.moeLayers.length;
    const lastMoe = this.moeLayers[nMoe - 1]!;
    for (let e = 0; e < E; e++) this.counts[l * E + e]! += rec.counts[e]!;
    this.dropped[l]! += rec.dropped;
    this.tokens[l]! += rec.tokens;
    if (rec.aux !== null) {
      this.auxSum += rec.aux / nMoe; // per-layer aux averaged over the MoE layers, per forward
      if (l === lastMoe) this.auxN++;
    }
    if (rec.zLoss !== null) {
      this.zSum += rec.zLoss / nMoe;
      if (l === lastMoe) this.zN++;
    }
    if (this.auxType === "mixtral") {
      if (l === this.moeLayers[0]) this.fwd = [];
      this.fwd.push(rec);
      if (l === lastMoe && this.fwd.length === nMoe) {
        this.auxSum += mixtralAux(this.fwd, E);
        this.auxN++;
        this.fwd = [];
      }
    }
  }

  /** Expert counts per layer summed over every reduced step so far (dp-summed; identical on every
   * rank), or null before the first step. Used as measured loads for `balanced` placement. */
  cumulativeCounts(): number[][] | null {
    return this.totals.steps === 0 ? null : this.totals.counts.map((r) => [...r]);
  }

  /**
   * Sum this step's records over `group` (the dp group; every member must call it) and return the
   * statistics; resets the accumulators and updates the dead-expert counters.
   */
  async reduceStep(comm: Communicator, group: Group): Promise<MoEStepStats> {
    await flushDeferredReads(); // statistics the gate left on the device (if no forward end read them)
    const L = this.numLayers;
    const E = this.numExperts;
    const buf = new Float64Array(L * E + 2 * L + 4);
    buf.set(this.counts, 0);
    buf.set(this.dropped, L * E);
    buf.set(this.tokens, L * E + L);
    buf.set([this.auxSum, this.auxN, this.zSum, this.zN], L * E + 2 * L);
    if (group.size > 1) await comm.allReduce(buf, { group });
    this.counts.fill(0);
    this.dropped.fill(0);
    this.tokens.fill(0);
    this.auxSum = this.auxN = this.zSum = this.zN = 0;
    this.fwd = [];
    const step = this.steps++;
    const layers: MoELayerStats[] = [];
    const warnings: string[] = [];
    for (const l of this.moeLayers) {
      const counts = Array.from(buf.subarray(l * E, (l + 1) * E));
      const s = loadSummary(counts);
      layers.push({ layer: l, counts, tokens: buf[L * E + L + l]!, dropped: buf[L * E + l]!, ...s });
      for (let e = 0; e < E; e++) {
        const i = l * E + e;
        this.idle[i] = counts[e] === 0 ? this.idle[i]! + 1 : 0;
        if (this.deadExpertSteps > 0 && this.idle[i] === this.deadExpertSteps) {
          warnings.push(`moe: expert ${e} of layer ${l} received no tokens for ${this.deadExpertSteps} steps (steps ${step - this.deadExpertSteps + 1}..${step})`);
        }
      }
    }
    const o = L * E + 2 * L;
    const stats: MoEStepStats = {
      step,
      layers,
      auxLoss: buf[o + 1]! > 0 ? buf[o]! / buf[o + 1]! : null,
      zLoss: buf[o + 3]! > 0 ? buf[o + 2]! / buf[o + 3]! : null,
      warnings,
    };
    const t = this.totals;
    t.steps++;
    for (const l of layers) {
      l.counts.forEach((c, e) => (t.counts[l.layer]![e]! += c));
      t.tokens[l.layer]! += l.tokens;
      t.dropped[l.layer]! += l.dropped;
    }
    if (stats.auxLoss !== null) {
      t.auxSum += stats.auxLoss;
      t.auxSteps++;
    }
    if (stats.zLoss !== null) {
      t.zSum += stats.zLoss;
      t.zSteps++;
    }
    t.warnings.push(...warnings);
    this.last = stats;
    return stats;
  }
}

/** Hugging Face's all-layer load-balancing loss from one forward's per-layer records (mixtral.ts):
 * E · Σ_e (Σ_l n_le / (L·T)) · (Σ_l P_le / L). */
export function mixtralAux(recs: readonly GateRecord[], E: number): number {
  const L = recs.length;
  let s = 0;
  for (let e = 0; e < E; e++) {
    let n = 0;
    let p = 0;
    for (const r of recs) {
      n += r.counts[e]! / (L * r.tokens);
      p += r.probMean[e]! / L;
    }
    s += n * p;
  }
  return E * s;
}

/** min, max, coefficient of variation and dead experts of a count vector. */
export function loadSummary(counts: readonly number[]): { min: number; max: number; cv: number; dead: number } {
  const n = counts.length;
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  let dead = 0;
  for (const c of counts) {
    min = Math.min(min, c);
    max = Math.max(max, c);
    sum += c;
    if (c === 0) dead++;
  }
  const m = sum / n;
  let v = 0;
  for (const c of counts) v += (c - m) * (c - m);
  const cv = m > 0 ? Math.sqrt(v / n) / m : 0;
  return { min, max, cv, dead };
}

/** The compact per-layer load line of the periodic log, e.g.
 * `moe L0 3/9 cv0.41 dead0 | L1 … | drop 12 aux 1.02 z 3.1` (min/max of counts). */
export function formatLoadLine(s: MoEStepStats): string {
  const parts = s.layers.map((l) => `L${l.layer} ${l.min}/${l.max} cv${l.cv.toFixed(2)} dead${l.dead}`);
  const dropped = s.layers.reduce((a, l) => a + l.dropped, 0);
  let tail = `drop ${dropped}`;
  if (s.auxLoss !== null) tail += ` aux ${s.auxLoss.toFixed(4)}`;
  if (s.zLoss !== null) tail += ` z ${s.zLoss.toFixed(4)}`;
  return `moe ${parts.join(" | ")} | ${tail}`;
}

/** Totals of a run (every reduced step), kept by {@link MoEStatsRecorder}. */
export interface MoERunTotals {
  steps: number;
  /** The layers with experts (the others' rows stay zero). */
  layers: number[];
  /** counts[layer][expert], summed over steps. */
  counts: number[][];
  tokens: number[];
  dropped: number[];
  auxSum: number;
  auxSteps: number;
  zSum: number;
  zSteps: number;
  warnings: string[];
}

/** The `moe` section of `--summary` from a run's totals: per layer the summed counts, tokens,
 * dropped pairs and their fraction, min/max/CV/dead of the summed counts; mean aux and z losses
 * over steps; all warnings. */
export function summarySection(t: MoERunTotals): {
  steps: number;
  layers: { layer: number; counts: number[]; tokens: number; dropped: number; dropFraction: number; min: number; max: number; cv: number; dead: number }[];
  auxLoss: number | null;
  zLoss: number | null;
  warnings: string[];
} {
  const layers = t.layers.map((l) => {
    const counts = t.counts[l]!;
    const pairs = counts.reduce((a, b) => a + b, 0);
    return { layer: l, counts: [...counts], tokens: t.tokens[l]!, dropped: t.dropped[l]!, dropFraction: pairs > 0 ? t.dropped[l]! / pairs : 0, ...loadSummary(counts) };
  });
  return { steps: t.steps, layers, auxLoss: t.auxSteps > 0 ? t.auxSum / t.auxSteps : null, zLoss: t.zSteps > 0 ? t.zSum / t.zSteps : null, warnings: [...t.warnings] };
}
