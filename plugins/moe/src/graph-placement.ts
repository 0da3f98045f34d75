/**
 * The placements that read the routing graph (docs/moe.md "Placement"):
 *
 * - `co_occurrence`: experts chosen together for the same token should share a rank, so a token
 *   bound for both is sent there once. The expert graph (edge weight = co-occurrence count,
 *   co-occurrence.ts) is split into ep_size parts of E/ep_size experts minimising the cut weight
 *   (partition.ts), with each rank's token load (the experts' counts) kept within
 *   {@link LOAD_TOLERANCE} of the mean where a start allows it.
 * - `topology`: ranks come in groups (hosts, NVLink islands; topology.ts) and bytes crossing
 *   groups cost most. First the experts are split into one part per group (E/groups each) by the
 *   same partitioner — minimising the weight that crosses groups, with the group loads balanced,
 *   which spreads the heavy experts across groups — then each group's experts are split among its
 *   ranks, minimising the weight that crosses ranks inside the group, loads balanced again.
 * Both give every rank E/ep_size experts. Without co-occurrence counts every cut is 0 and the
 * result is the load-balanced start (or contiguous when the loads are also absent or even).
 */
import { partitionBalanced } from "./partition.ts";
import type { LayerPlacement } from "./placement.ts";

/** Allowed excess of a part's token load over the mean (fraction). */
export const LOAD_TOLERANCE = 0.1;

function layerPlacement(owner: Int32Array, epSize: number): LayerPlacement {
  const local: number[][] = Array.from({ length: epSize }, () => []);
  for (let e = 0; e < owner.length; e++) local[owner[e]!]!.push(e);
  return { owner, local };
}

function checkPairs(pairs: ArrayLike<number>, E: number, what: string): void {
  if (pairs.length !== E * E) throw new Error(`moe placement ${what}: co-occurrence matrix has ${pairs.length} entries, expected ${E}×${E}`);
}

/**
 * `co_occurrence` placement of one layer: owner[e] = part of e in the balanced partition of the
 * co-occurrence graph `pairs` (E×E, symmetric, ≥ 0) into epSize parts; `load` (per-expert tokens)
 * optional. @throws when E % epSize ≠ 0 or the inputs have the wrong size or invalid entries.
 */
export function coOccurrencePlacement(E: number, epSize: number, pairs: ArrayLike<number>, load?: ArrayLike<number>): LayerPlacement {
  checkPairs(pairs, E, "co_occurrence");
  const part = partitionBalanced(pairs, E, epSize, { load, loadTolerance: LOAD_TOLERANCE });
  return layerPlacement(part, epSize);
}

/**
 * `topology` placement of one layer: `groups` = groups of EP ranks (equal sizes, covering
 * 0..epSize−1; topology.ts epGroupsOf); experts are split into groups first, then into the ranks
 * of each group (module comment). `pairs` (E×E) and `load` (E) as for {@link coOccurrencePlacement}.
 * @throws when the sizes do not divide or the groups do not cover the EP ranks exactly once.
 */
export function topologyPlacement(E: number, epSize: number, groups: readonly (readonly number[])[], pairs: ArrayLike<number>, load?: ArrayLike<number>): LayerPlacement {
  checkPairs(pairs, E, "topology");
  const G = groups.length;
  const r = groups[0]?.length ?? 0;
  const seen = new Set(groups.flat());
  if (G * r !== epSize || seen.size !== epSize || groups.some((g) => g.length !== r) || [...seen].some((x) => x < 0 || x >= epSize)) {
    throw new Error(`moe placement topology: groups ${JSON.stringify(groups)} must split EP ranks 0..${epSize - 1} into equal groups`);
  }
  if (E % epSize !== 0) throw new Error(`moe placement topology: num_local_experts ${E} is not divisible by moe.ep_size ${epSize}`);
  const groupOfExpert = partitionBalanced(pairs, E, G, { load, loadTolerance: LOAD_TOLERANCE });
  const owner = new Int32Array(E);
  for (let g = 0; g < G; g++) {
    const members = Array.from({ length: E }, (_, e) => e).filter((e) => groupOfExpert[e] === g);
    const n = members.length;
    const sub = new Float64Array(n * n);
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) sub[i * n + j] = i === j ? 0 : pairs[members[i]! * E + members[j]!]!;
    const subLoad = load ? members.map((e) => load[e]!) : undefined;
    const rankIn = partitionBalanced(sub, n, r, { load: subLoad, loadTolerance: LOAD_TOLERANCE });
    const ranks = [...groups[g]!].sort((a, b) => a - b);
    members.forEach((e, i) => (owner[e] = ranks[rankIn[i]!]!));
  }
  return layerPlacement(owner, epSize);
}
