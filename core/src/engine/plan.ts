/**
 * Shard plans: which elements of a unit's flat buffers this rank owns (the `partition` hook's answer).
 *
 * A unit's flat buffer of `numel` elements is split over the `n` ranks of its group into equal
 * contiguous shards of `s = ceil(numel / n)` elements (ZeRO paper §5; DeepSpeed pads the flat buffer
 * so every rank holds the same count). Rank `r` owns `[r·s, min((r+1)·s, numel))`; the rest of its
 * `s`-element shard is padding, reported separately (docs/domain.md §1), never hidden.
 */
import type { Group } from "../comm/communicator.ts";
import type { UnitInfo } from "./plugin-context.ts";

/** Whether a piece of state is whole on every rank of the group or split into shards. */
export type Placement = "replicated" | "sharded";

/** The partition of one unit on this rank. */
export interface UnitPlan {
  /** The group the unit's state is split and reduced over (dp for dense units, edp for experts). */
  group: Group;
  /** 16-bit (or f32) parameters. */
  params: Placement;
  /** Gradients. */
  grads: Placement;
  /** Optimizer states (fp32 master copy when mixed precision, first and second moments). */
  optim: Placement;
  /** Unit elements (without padding). */
  numel: number;
  /** Elements per shard, `ceil(numel / group.size)` (≥ 1 for a non-empty unit). */
  shardSize: number;
  /** First element of this rank's shard, `group.rank · shardSize`. */
  shardStart: number;
  /** Real (non-padding) elements in this rank's shard. */
  owned: number;
}

/** Compute the shard geometry for `unit` over `group` with the given placements.
 * @throws if the group is empty. */
export function makePlan(unit: UnitInfo, group: Group, params: Placement, grads: Placement, optim: Placement): UnitPlan {
  if (group.size < 1) throw new Error(`makePlan(${unit.name}): empty group ${group.name}`);
  const numel = unit.numel;
  const shardSize = Math.max(1, Math.ceil(numel / group.size));
  const shardStart = group.rank * shardSize;
  const owned = Math.max(0, Math.min(shardSize, numel - shardStart));
  return { group, params, grads, optim, numel, shardSize, shardStart, owned };
}

/** Whether any state of the plan is sharded. */
export function isSharded(plan: UnitPlan): boolean {
  return plan.params === "sharded" || plan.grads === "sharded" || plan.optim === "sharded";
}

/** Padding elements this rank holds in each sharded state (shardSize − owned). */
export function paddingElements(plan: UnitPlan): number {
  return plan.shardSize - plan.owned;
}
