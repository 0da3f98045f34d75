/**
 * The run's routing statistics that see pairs (co-occurrence.ts): per MoE layer the co-occurrence
 * counts of expert pairs chosen for the same token and, with ep_size > 1, the P×P dispatch traffic
 * of the EP group (rows and distinct token copies, row = source EP rank).
 *
 * Use: the gate's record carries the routing indices (GateRecord.indices, read with the other
 * statistics: on the host path they are the host choice, on the device path one deferred read of
 * the [T·k] Int32 choice, batched with the counts). {@link PairStatsRecorder.observe} adds them on
 * the host (O(T·k²) per layer); after each step EVERY rank calls
 * {@link PairStatsRecorder.reduceStep} — one all_reduce over the dp group of the step's upper
 * triangles (E·(E−1)/2 per layer) and traffic (2·P² per layer) — and the run's totals grow by it.
 * Totals are identical on every rank; they go to the `--summary` `moe` section (`expert_pairs`,
 * `dispatch_traffic`) and to the checkpoint's `plugins.moe.expert_pairs`, from which the
 * `co_occurrence` and `topology` placements are computed on resume.
 */
import type { Communicator, Group } from "@zeromoe/core";
import { addPairCounts, addTraffic, crossRank } from "./co-occurrence.ts";

/** Run totals (identical on every rank). */
export interface PairTotals {
  /** pairs[layer] = E×E co-occurrence counts, row-major (a dense layer's stays zero). */
  pairs: Float64Array[];
  /** rows[layer], copies[layer] = P×P traffic (row = source EP rank), or empty with ep_size 1. */
  rows: Float64Array[];
  copies: Float64Array[];
}

/** Accumulates co-occurrence and traffic per step, reduces over dp (module comment). */
export class PairStatsRecorder {
  readonly numExperts: number;
  readonly epSize: number;
  readonly moeLayers: readonly number[];
  private epRank = 0;
  private owner: readonly ArrayLike<number>[] | null = null;
  private readonly step: PairTotals;
  /** Totals over every reduced step. */
  readonly totals: PairTotals;

  constructor(numLayers: number, numExperts: number, epSize: number, moeLayers: readonly number[]) {
    this.numExperts = numExperts;
    this.epSize = epSize;
    this.moeLayers = [...moeLayers].sort((a, b) => a - b);
    const make = (): PairTotals => ({
      pairs: Array.from({ length: numLayers }, () => new Float64Array(numExperts * numExperts)),
      rows: Array.from({ length: numLayers }, () => new Float64Array(epSize > 1 ? epSize * epSize : 0)),
      copies: Array.from({ length: numLayers }, () => new Float64Array(epSize > 1 ? epSize * epSize : 0)),
    });
    this.step = make();
    this.totals = make();
  }

  /** Where experts live (owner[layer][e] = EP rank) and this rank's EP rank; traffic is recorded
   * only once it is set. */
  setPlacement(owner: readonly ArrayLike<number>[], epRank: number): void {
    this.owner = owner;
    this.epRank = epRank;
  }

  /** Add one layer's routing of one training forward: `indices` [T·k] the pre-drop choice
   * (co-occurrence), `kept` [T·k] the choice after capacity drops (−1 = dropped; traffic), default
   * `indices`. */
  observe(layer: number, indices: ArrayLike<number>, T: number, k: number, kept: ArrayLike<number> = indices): void {
    const E = this.numExperts;
    if (k >= 2) addPairCounts(indices, T, k, E, this.step.pairs[layer]!);
    if (this.epSize > 1 && this.owner) addTraffic(kept, T, k, this.owner[layer]!, this.epRank, this.epSize, this.step.rows[layer]!, this.step.copies[layer]!);
  }

  /** Sum the step's figures over `group` (every member calls it), add them to the totals, reset. */
  async reduceStep(comm: Communicator, group: Group): Promise<void> {
    const E = this.numExperts;
    const PP = this.epSize > 1 ? this.epSize * this.epSize : 0;
    const tri = (E * (E - 1)) / 2;
    const per = tri + 2 * PP;
    const buf = new Float64Array(this.moeLayers.length * per);
    this.moeLayers.forEach((l, i) => {
      const p = this.step.pairs[l]!;
      let o = i * per;
      for (let a = 0; a < E; a++) for (let b = a + 1; b < E; b++) buf[o++] = p[a * E + b]!;
      buf.set(this.step.rows[l]!, o);
      buf.set(this.step.copies[l]!, o + PP);
    });
    if (group.size > 1 && buf.length > 0) await comm.allReduce(buf, { group });
    this.moeLayers.forEach((l, i) => {
      const p = this.totals.pairs[l]!;
      let o = i * per;
      for (let a = 0; a < E; a++)
        for (let b = a + 1; b < E; b++) {
          p[a * E + b]! += buf[o]!;
          p[b * E + a]! += buf[o++]!;
        }
      for (let j = 0; j < PP; j++) {
        this.totals.rows[l]![j]! += buf[o + j]!;
        this.totals.copies[l]![j]! += buf[o + PP + j]!;
      }
      this.step.pairs[l]!.fill(0);
      this.step.rows[l]!.fill(0);
      this.step.copies[l]!.fill(0);
    });
  }

  /** The co-occurrence totals per layer as E×E nested arrays (a dense layer's: []). */
  pairMatrices(): number[][][] {
    const E = this.numExperts;
    const isMoe = new Set(this.moeLayers);
    return this.totals.pairs.map((p, l) => (isMoe.has(l) ? Array.from({ length: E }, (_, a) => Array.from(p.subarray(a * E, (a + 1) * E))) : []));
  }

  /** The summary's `dispatch_traffic` (null with ep_size 1): per layer P×P rows and copies and
   * their off-diagonal (cross-rank) sums. */
  trafficSection(): DispatchTraffic | null {
    const P = this.epSize;
    if (P < 2) return null;
    const isMoe = new Set(this.moeLayers);
    const nest = (m: Float64Array): number[][] => Array.from({ length: P }, (_, a) => Array.from(m.subarray(a * P, (a + 1) * P)));
    const layers = this.moeLayers.map((l) => ({ layer: l, rows: nest(this.totals.rows[l]!), copies: nest(this.totals.copies[l]!), cross_rank_rows: crossRank(this.totals.rows[l]!, P), cross_rank_copies: crossRank(this.totals.copies[l]!, P) }));
    return { ep_size: P, layers: layers.filter((x) => isMoe.has(x.layer)) };
  }
}

/** The `--summary` `moe.dispatch_traffic` section (counts summed over the run and the dp group;
 * multiply by hidden_size × activation bytes for bytes). */
export interface DispatchTraffic {
  ep_size: number;
  layers: { layer: number; rows: number[][]; copies: number[][]; cross_rank_rows: number; cross_rank_copies: number }[];
}

/**
 * Per-layer co-occurrence matrices (flattened E×E) from a nested [layer][E][E] array — a summary's
 * or checkpoint's `expert_pairs`; a layer given as [] (dense) comes back undefined.
 * @throws naming `what` when a layer is not E×E of finite numbers ≥ 0 or the layer count differs.
 */
export function pairsFromNested(nested: unknown, numLayers: number, E: number, what: string): (Float64Array | undefined)[] {
  if (!Array.isArray(nested) || nested.length !== numLayers) throw new Error(`${what}: expected ${numLayers} layers of ${E}×${E} co-occurrence counts`);
  return nested.map((m, l) => {
    if (Array.isArray(m) && m.length === 0) return undefined;
    if (!Array.isArray(m) || m.length !== E || !m.every((r) => Array.isArray(r) && r.length === E && r.every((x) => Number.isFinite(x) && x >= 0))) throw new Error(`${what}[${l}]: expected ${E}×${E} finite counts ≥ 0`);
    return Float64Array.from((m as number[][]).flat());
  });
}
