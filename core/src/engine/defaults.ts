/**
 * Core's default hooks: plain data parallelism (ZeRO stage 0). Every rank holds everything; the
 * reduce hook accumulates each micro-batch's gradients locally and all_reduces them (sum, fixed rank
 * order) after the last micro-batch of the step.
 */
import type { Group } from "../comm/communicator.ts";
import type { Unit } from "../nn/unit.ts";
import { accumulateLocal, allReduceAccumulated } from "./grad-reduce.ts";
import type { EngineEnv, EngineHooks } from "./hooks.ts";
import { makePlan } from "./plan.ts";

/** The group a unit's state is partitioned and reduced over: edp for expert units, dp otherwise
 * (domain.md §4). */
export function groupFor(unit: Unit, env: EngineEnv): Group {
  return unit.kind === "expert" ? env.groups.edp : env.groups.dp;
}

/** Whether the current micro-batch is the last of the step. */
export function isLastMicro(env: EngineEnv): boolean {
  return env.micro.index === env.micro.count - 1;
}

/** Plain data-parallel hooks. */
export function defaultHooks(): EngineHooks {
  return {
    partition: { plan: (unit, env) => makePlan(unit, groupFor(unit, env), "replicated", "replicated", "replicated") },
    gather: { gather: () => {}, release: () => {} },
    reduce: {
      gradReady: async (unit, env) => {
        accumulateLocal(env, unit);
        if (isLastMicro(env)) await allReduceAccumulated(env, unit);
      },
      finish: () => {},
    },
    route: { create: () => null },
    offload: { optimizerDevice: () => "device" },
    checkpoint: { ownedUnits: (env) => [...env.states.values()].filter((s) => s.plan.optim === "sharded" || env.comm.rank === 0).map((s) => s.unit) },
  };
}
