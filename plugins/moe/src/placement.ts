/**
 * Expert placement: which rank of an expert-parallel (EP) group holds which experts of a layer.
 *
 * An EP group of `ep_size` ranks holds one full set of E experts, E/ep_size per rank (docs/domain.md §4;
 * every rank holds the same number so memory is even). Strategies (`moe.placement`):
 * - `contiguous` (default, DeepSpeed's layout): rank j holds experts [j·E/P, (j+1)·E/P).
 * - `round_robin`: expert e lives on rank e mod P.
 * - `balanced`: greedy bin-packing by measured load (Graham's LPT rule, as in DeepSeek's EPLB
 *   without replication): experts sorted by load (descending, ties by index) go one by one to the
 *   rank with the smallest total load that still has a free slot (ties to the lower rank), so each
 *   rank's token load is as even as the greedy rule makes it. Without measured loads it equals
 *   `contiguous` (the caller says so in its log).
 * - `co_occurrence` and `topology`: partitions of the expert co-occurrence graph (graph-placement.ts).
 *
 * A placement is per layer (each layer has its own loads). It is recorded in the checkpoint
 * manifest ({@link placementRecord}) so a resumed job puts every expert back on the same rank.
 */

import { coOccurrencePlacement, topologyPlacement } from "./graph-placement.ts";

/** Names of the strategies. */
export type PlacementStrategy = "contiguous" | "round_robin" | "balanced" | "co_occurrence" | "topology";

/** What the graph placements read (graph-placement.ts): per layer the co-occurrence matrix (E×E)
 * and, for `topology`, the groups of EP ranks. */
export interface PlacementGraph {
  pairs?: readonly (ArrayLike<number> | undefined)[] | null;
  groups?: readonly (readonly number[])[] | null;
}

/** Placement of one layer's experts on the ranks of an EP group. */
export interface LayerPlacement {
  /** owner[e] = EP-group rank holding expert e. */
  owner: Int32Array;
  /** local[j] = the experts rank j holds, ascending. */
  local: number[][];
}

function check(numExperts: number, epSize: number): void {
  if (!Number.isInteger(numExperts) || numExperts < 1) throw new Error(`moe placement: num_local_experts must be a positive integer, got ${numExperts}`);
  if (!Number.isInteger(epSize) || epSize < 1) throw new Error(`moe placement: ep_size must be a positive integer, got ${epSize}`);
  if (numExperts % epSize !== 0) throw new Error(`moe placement: num_local_experts ${numExperts} is not divisible by moe.ep_size ${epSize}`);
}

function fromOwner(owner: Int32Array, epSize: number): LayerPlacement {
  const local: number[][] = Array.from({ length: epSize }, () => []);
  for (let e = 0; e < owner.length; e++) local[owner[e]!]!.push(e);
  return { owner, local };
}

/** `contiguous`: rank j holds experts [j·E/P, (j+1)·E/P). @throws when E % P ≠ 0. */
export function contiguousPlacement(numExperts: number, epSize: number): LayerPlacement {
  check(numExperts, epSize);
  const per = numExperts / epSize;
  return fromOwner(Int32Array.from({ length: numExperts }, (_, e) => Math.floor(e / per)), epSize);
}

/** `round_robin`: expert e on rank e mod P. @throws when E % P ≠ 0. */
export function roundRobinPlacement(numExperts: number, epSize: number): LayerPlacement {
  check(numExperts, epSize);
  return fromOwner(Int32Array.from({ length: numExperts }, (_, e) => e % epSize), epSize);
}

/**
 * `balanced`: greedy LPT bin-packing of experts by `load` (tokens routed to each expert, any
 * non-negative unit) into P ranks of E/P slots each (see the module comment).
 * @throws when E % P ≠ 0, or `load` has the wrong length or a negative/non-finite entry.
 */
export function balancedPlacement(numExperts: number, epSize: number, load: ArrayLike<number>): LayerPlacement {
  check(numExperts, epSize);
  if (load.length !== numExperts) throw new Error(`moe placement balanced: load has ${load.length} entries, expected num_local_experts ${numExperts}`);
  for (let e = 0; e < numExperts; e++) {
    const v = load[e]!;
    if (!Number.isFinite(v) || v < 0) throw new Error(`moe placement balanced: load[${e}] = ${v} must be finite and ≥ 0`);
  }
  const per = numExperts / epSize;
  const order = Array.from({ length: numExperts }, (_, e) => e).sort((a, b) => load[b]! - load[a]! || a - b);
  const total = new Float64Array(epSize);
  const used = new Int32Array(epSize);
  const owner = new Int32Array(numExperts);
  for (const e of order) {
    let best = -1;
    for (let j = 0; j < epSize; j++) {
      if (used[j]! >= per) continue;
      if (best < 0 || total[j]! < total[best]!) best = j;
    }
    owner[e] = best;
    used[best]!++;
    total[best]! += load[e]!;
  }
  return fromOwner(owner, epSize);
}

/** The placement of every layer for a strategy. `loads[l]` (per-expert load of layer l) is used by
 * `balanced`; without it a layer falls back to `contiguous`. `co_occurrence` reads `graph.pairs[l]`
 * (and the loads), `topology` also `graph.groups` (graph-placement.ts); a layer without pairs
 * falls back to `balanced` by its loads (so to `contiguous` without either).
 * @throws on an unknown strategy or invalid sizes/loads, or `topology` without groups. */
export function placeExperts(strategy: PlacementStrategy, numLayers: number, numExperts: number, epSize: number, loads?: readonly (ArrayLike<number> | undefined)[] | null, graph?: PlacementGraph): LayerPlacement[] {
  const out: LayerPlacement[] = [];
  for (let l = 0; l < numLayers; l++) {
    if (strategy === "contiguous") out.push(contiguousPlacement(numExperts, epSize));
    else if (strategy === "round_robin") out.push(roundRobinPlacement(numExperts, epSize));
    else if (strategy === "balanced") {
      const ld = loads?.[l];
      out.push(ld ? balancedPlacement(numExperts, epSize, ld) : contiguousPlacement(numExperts, epSize));
    } else if (strategy === "co_occurrence" || strategy === "topology") {
      const ld = loads?.[l];
      const pairs = graph?.pairs?.[l];
      if (strategy === "topology" && !graph?.groups) throw new Error(`moe.placement "topology" needs moe.topology (the groups of ranks)`);
      if (!pairs) out.push(ld ? balancedPlacement(numExperts, epSize, ld) : contiguousPlacement(numExperts, epSize));
      else if (strategy === "co_occurrence") out.push(coOccurrencePlacement(numExperts, epSize, pairs, ld));
      else out.push(topologyPlacement(numExperts, epSize, graph!.groups!, pairs, ld));
    } else throw new Error(`moe.placement: unknown strategy "${strategy as string}" (expected contiguous, round_robin, balanced, co_occurrence or topology)`);
  }
  return out;
}

/** Max over ranks of the summed load of the experts each rank holds, divided by the mean per rank
 * (1 = perfectly even). Used to compare strategies under a skewed router. */
export function loadImbalance(p: LayerPlacement, load: ArrayLike<number>): number {
  const P = p.local.length;
  const per = new Float64Array(P);
  let tot = 0;
  for (let e = 0; e < p.owner.length; e++) {
    per[p.owner[e]!]! += load[e]!;
    tot += load[e]!;
  }
  if (tot === 0) return 1;
  return Math.max(...per) / (tot / P);
}

/** What the checkpoint manifest records about expert placement (JSON-serialisable). */
export interface PlacementRecord {
  strategy: PlacementStrategy;
  ep_size: number;
  num_local_experts: number;
  /** owner[l][e] = EP-group rank holding expert e of layer l. */
  owner: number[][];
  /** Loads the `balanced` strategy used (per layer), or null. */
  loads: number[][] | null;
}

/** The manifest record of a placement. */
export function placementRecord(strategy: PlacementStrategy, epSize: number, layers: readonly LayerPlacement[], loads: readonly (ArrayLike<number> | undefined)[] | null): PlacementRecord {
  return {
    strategy,
    ep_size: epSize,
    num_local_experts: layers[0]?.owner.length ?? 0,
    owner: layers.map((p) => Array.from(p.owner)),
    loads: loads ? loads.map((l) => (l ? Array.from(l) : [])) : null,
  };
}

/** Rebuild placements from a manifest record (to resume with the same placement).
 * @throws naming the field when the record does not match `numLayers`/`numExperts`/`epSize`. */
export function placementFromRecord(rec: PlacementRecord, numLayers: number, numExperts: number, epSize: number): LayerPlacement[] {
  if (rec.ep_size !== epSize) throw new Error(`checkpoint manifest moe.placement.ep_size ${rec.ep_size} differs from the job's moe.ep_size ${epSize}`);
  if (rec.owner.length !== numLayers) throw new Error(`checkpoint manifest moe.placement.owner has ${rec.owner.length} layers, the model has ${numLayers}`);
  return rec.owner.map((row, l) => {
    if (row.length !== numExperts) throw new Error(`checkpoint manifest moe.placement.owner[${l}] has ${row.length} experts, the model has ${numExperts}`);
    const owner = Int32Array.from(row);
    const count = new Int32Array(epSize);
    for (const j of owner) {
      if (!(j >= 0 && j < epSize)) throw new Error(`checkpoint manifest moe.placement.owner[${l}] names rank ${j}, outside [0, ${epSize})`);
      count[j]!++;
    }
    if (count.some((c) => c !== numExperts / epSize)) throw new Error(`checkpoint manifest moe.placement.owner[${l}] does not give every rank ${numExperts / epSize} experts`);
    return fromOwner(owner, epSize);
  });
}
