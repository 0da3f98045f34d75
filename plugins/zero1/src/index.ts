/**
 * ZeRO stage 1 (Rajbhandari et al., SC'20, §5.1 "P_os"): optimizer states are partitioned over the
 * unit's data-parallel group; parameters and gradients stay whole on every rank.
 *
 * Per step: gradients accumulate locally over micro-batches, then one reduce_scatter (sum, fixed
 * rank order) leaves each rank the summed gradient of its shard; each rank runs AdamW on its shard;
 * core's optimizer all_gathers the updated parameters (params replicated, optim sharded). Traffic
 * per rank per step ≈ Ψ (reduce_scatter) + Ψ (all_gather) = 2Ψ elements (docs/domain.md §2).
 * Memory per rank: 2Ψ + 2Ψ + 12Ψ/N bytes with bf16/fp16, 4Ψ + 4Ψ + 8Ψ/N with fp32 (docs/domain.md §1).
 */
import { accumulateLocal, definePlugin, groupFor, makePlan, partitionedBytes, reduceScatterAccumulated, type EngineHooks, type SetupContext } from "@zeromoe/core/plugin";

type Hooks = EngineHooks & Record<string, unknown>;

/** The zero1 plugin (selected by `zero_optimization.stage: 1`). */
export const zero1 = definePlugin<Hooks, SetupContext>({
  name: "zero1",
  configKey: "zero_optimization",
  conflicts: ["zero2", "zero3"],
  claims: ["partition", "reduce"],
  // memory estimate: optimizer states of each part sharded over its group
  memory: { partition: (part, input) => partitionedBytes(part, input, "replicated", "replicated", "sharded") },
  setup(ctx) {
    ctx.claim("partition", { plan: (unit, hc) => makePlan(unit, groupFor(unit, hc), "replicated", "replicated", "sharded") });
    ctx.claim("reduce", {
      gradReady: async (unit, hc) => {
        accumulateLocal(hc, unit);
        if (hc.isLastMicro) await reduceScatterAccumulated(hc, unit);
      },
      finish: () => {},
      // gradReady only adds the micro-batch gradient into the whole accumulator
      accumulatesLocally: () => true,
    });
  },
});

export default zero1;
