/**
 * What the `co_occurrence` and `topology` placements read from the job (docs/moe.md "Placement"):
 * - `moe.topology` (a file, topology.ts) → the groups of EP ranks; required by `topology`, also
 *   accepted (and checked) with other placements;
 * - `moe.routing_log` (a `--summary` JSON of an earlier run) → per-layer co-occurrence counts
 *   (`moe.expert_pairs`) and loads (`moe.expert_counts`) for placing at start.
 * Every problem is a ConfigError naming the key (exit 2).
 */
import { readFileSync } from "node:fs";
import { ConfigError } from "@zeromoe/core/config";
import type { MoeConfig } from "@zeromoe/core/config";
import { pairsFromNested } from "./pair-stats.ts";
import { epGroupsOf, readTopology } from "./topology.ts";

/** The placement inputs of a job (null where the job gives none). */
export interface PlacementInputs {
  /** Groups of EP ranks (topology.ts epGroupsOf). */
  groups: number[][] | null;
  /** Per-layer co-occurrence matrices (E×E, flattened) from moe.routing_log. */
  pairs: (Float64Array | undefined)[] | null;
  /** Per-layer expert counts from moe.routing_log. */
  loads: number[][] | null;
}

function fail(path: string, message: string): never {
  throw new ConfigError([{ path, message }], "invalid moe placement input");
}

/**
 * Read `moe.topology` and `moe.routing_log` for a job of `worldSize` ranks, `epSize`, `numLayers`
 * layers of `numExperts` experts. @throws ConfigError naming moe.topology (placement "topology"
 * without it; a file that does not cover the ranks, groups of unequal size, unknown ranks) or
 * moe.routing_log (unreadable, not JSON, counts of the wrong shape).
 */
export function placementInputs(cfg: Pick<MoeConfig, "placement" | "topology" | "routing_log">, worldSize: number, epSize: number, numLayers: number, numExperts: number): PlacementInputs {
  if (cfg.placement === "topology" && !cfg.topology) fail("moe.topology", `placement "topology" needs moe.topology: a JSON file {"groups": [[0,1],[2,3]]} of world ranks, or a hostfile`);
  const groups = cfg.topology ? epGroupsOf(readTopology(cfg.topology, worldSize), worldSize, epSize) : null;
  let pairs: (Float64Array | undefined)[] | null = null;
  let loads: number[][] | null = null;
  if (cfg.routing_log) {
    let doc: Record<string, unknown>;
    try {
      doc = JSON.parse(readFileSync(cfg.routing_log, "utf8")) as Record<string, unknown>;
    } catch (e) {
      fail("moe.routing_log", `cannot read ${cfg.routing_log} as JSON: ${(e as Error).message}`);
    }
    const m = (typeof doc.moe === "object" && doc.moe !== null ? doc.moe : doc) as Record<string, unknown>;
    try {
      if (m.expert_pairs !== undefined) pairs = pairsFromNested(m.expert_pairs, numLayers, numExperts, `${cfg.routing_log} moe.expert_pairs`);
      const c = m.expert_counts;
      if (c !== undefined) {
        if (!Array.isArray(c) || c.length !== numLayers || !c.every((r) => Array.isArray(r) && (r.length === numExperts || r.length === 0) && r.every((x) => Number.isFinite(x) && x >= 0))) throw new Error(`${cfg.routing_log} moe.expert_counts: expected ${numLayers} layers of ${numExperts} counts ≥ 0`);
        loads = (c as number[][]).map((r) => (r.length === 0 ? new Array<number>(numExperts).fill(0) : r));
      }
    } catch (e) {
      fail("moe.routing_log", (e as Error).message);
    }
    if (!pairs && !loads) fail("moe.routing_log", `${cfg.routing_log} has no moe.expert_pairs or moe.expert_counts (write one with --summary)`);
  }
  return { groups, pairs, loads };
}
