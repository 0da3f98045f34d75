/**
 * ZeRO stage 3 (Rajbhandari et al., SC'20, §5.3 "P_os+g+p"): parameters, gradients and optimizer
 * states are all partitioned over the unit's group (dp for dense units, edp for experts).
 *
 * - Construction-time partitioning (like `deepspeed.zero.Init`): the partition hook plans the
 *   parameters sharded, so core allocates and initialises only this rank's shard of each unit —
 *   no rank ever holds all full parameters.
 * - Gather on demand with prefetch and release (gatherer.ts).
 * - Gradients: zero2's bucketed reduce_scatter (imported from its public export).
 * - Units smaller than `stage3_param_persistence_threshold` elements stay whole on every rank
 *   (their gradients and optimizer states are still sharded; core all_gathers them after the step).
 *
 * Traffic ≈ 3Ψ per rank per step with persistence threshold 0 and reuse distance 0 (all_gather in
 * forward and in backward, reduce_scatter of gradients; docs/domain.md §2). Memory 16Ψ/N (mixed) or
 * 16Ψ/N (fp32) bytes of model states per rank, plus b·Ψ_p·(N−1)/N for the Ψ_p elements of
 * persistent units (b = 2 or 4 bytes per parameter; {@link zero3Memory}), plus gathered parameters
 * (reported as `gathered`).
 */
import { definePlugin, groupFor, makePlan, partElementsInUnitsBelow, partitionedBytes, type EngineHooks, type MemoryEstimateInput, type MemoryPart, type SetupContext } from "@zeromoe/core/plugin";
import { createBucketedReducer } from "@zeromoe/plugin-zero2";
import { createGatherer } from "./gatherer.ts";

export { createGatherer } from "./gatherer.ts";

type Hooks = EngineHooks & Record<string, unknown>;

/**
 * ZeRO-3's share of the up-front memory estimate (core memory-estimate.ts): a part of X elements
 * over n ranks costs (a + g + o)·X/n bytes per rank, except that the X_p elements in units under
 * `stage3_param_persistence_threshold` keep whole parameters (as the partition hook plans them), so
 * params = a·(X_p + (X − X_p)/n); their gradients and optimizer states stay sharded. The whole
 * bytes a·X_p are reported as `wholeParams` (offload_param leaves them on the device). Gathered
 * parameters and padding come on top.
 */
export function zero3Memory(part: MemoryPart, input: MemoryEstimateInput): MemoryPart {
  const out = partitionedBytes(part, input, "sharded", "sharded", "sharded");
  const xp = partElementsInUnitsBelow(part, input, input.config.zero_optimization.stage3_param_persistence_threshold);
  if (xp === 0) return out;
  const a = input.perParameter.param;
  const n = Math.max(1, part.groupSize);
  return { ...out, params: a * xp + (a * (part.elements - xp)) / n, wholeParams: a * xp };
}

/** The zero3 plugin (selected by `zero_optimization.stage: 3`). */
export const zero3 = definePlugin<Hooks, SetupContext>({
  name: "zero3",
  configKey: "zero_optimization",
  conflicts: ["zero1", "zero2"],
  claims: ["partition", "gather", "reduce"],
  // memory estimate: every state of each part sharded over its group, persistent small units'
  // parameters whole (gathered parameters come on top)
  memory: { partition: zero3Memory },
  setup(ctx) {
    ctx.claim("partition", {
      plan: (unit, hc) => {
        const persistent = unit.numel < hc.config.zero_optimization.stage3_param_persistence_threshold;
        return makePlan(unit, groupFor(unit, hc), persistent ? "replicated" : "sharded", "sharded", "sharded");
      },
    });
    ctx.claim("gather", createGatherer());
    ctx.claim("reduce", createBucketedReducer());
  },
});

export default zero3;
