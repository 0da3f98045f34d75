/**
 * Core's default hooks: plain data parallelism (ZeRO stage 0). Every rank holds everything; the
 * reduce hook accumulates each micro-batch's gradients locally and all_reduces them (sum, fixed rank
 * order) after the last micro-batch of the step.
 */
import type { Group } from "../comm/communicator.ts";
import { accumulateLocal, allReduceAccumulated } from "./grad-reduce.ts";
import type { EngineHooks } from "./hooks.ts";
import { makePlan } from "./plan.ts";
import type { JobView, UnitInfo } from "./plugin-context.ts";

/** The group a unit's state is partitioned and reduced over: edp for expert units, dp otherwise
 * (docs/domain.md §4). */
export function groupFor(unit: UnitInfo, ctx: Pick<JobView, "groups">): Group {
  return unit.kind === "expert" ? ctx.groups.edp : ctx.groups.dp;
}

/** Plain data-parallel hooks. */
export function defaultHooks(): EngineHooks {
  return {
    partition: { plan: (unit, env) => makePlan(unit, groupFor(unit, env), "replicated", "replicated", "replicated") },
    gather: { gather: () => {}, release: () => {} },
    reduce: {
      gradReady: async (unit, ctx) => {
        accumulateLocal(ctx, unit);
        if (ctx.isLastMicro) await allReduceAccumulated(ctx, unit);
      },
      finish: () => {},
      // gradReady only adds the micro-batch gradient into the replicated accumulator
      accumulatesLocally: (unit) => unit.plan.grads === "replicated",
    },
    route: { dispatcher: () => null },
    offload: { optimizerDevice: () => "device" },
    // a sharded state is written by each rank holding a shard, a replicated one by world rank 0
    checkpoint: { ownedUnits: (ctx) => ctx.units().filter((u) => u.plan.optim === "sharded" || ctx.rank === 0) },
  };
}
