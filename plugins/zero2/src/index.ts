/**
 * ZeRO stage 2 (Rajbhandari et al., SC'20, §5.2 "P_os+g"): optimizer states AND gradients are
 * partitioned over the unit's group; parameters stay whole on every rank.
 *
 * Per micro-batch, as each unit's gradients complete during backward, they are reduce_scattered in
 * buckets (`reduce_bucket_size`, `overlap_comm`; see bucketed-reducer.ts) into the owned gradient
 * shard; full-size gradients live only transiently. After AdamW on the shard, core all_gathers the
 * updated parameters. Traffic ≈ 2Ψ per rank per step; memory 2Ψ + 14Ψ/N bytes (bf16/fp16) or
 * 4Ψ + 12Ψ/N (fp32) (docs/domain.md §1–2). `contiguous_gradients` is inherent: every shard is one
 * contiguous buffer.
 */
import { definePlugin, groupFor, makePlan, partitionedBytes, type EngineHooks, type SetupContext } from "@zeromoe/core/plugin";
import { createBucketedReducer } from "./bucketed-reducer.ts";

export { createBucketedReducer } from "./bucketed-reducer.ts";

type Hooks = EngineHooks & Record<string, unknown>;

/** The zero2 plugin (selected by `zero_optimization.stage: 2`). */
export const zero2 = definePlugin<Hooks, SetupContext>({
  name: "zero2",
  configKey: "zero_optimization",
  conflicts: ["zero1", "zero3"],
  claims: ["partition", "reduce"],
  // memory estimate: gradients and optimizer states of each part sharded over its group
  memory: { partition: (part, input) => partitionedBytes(part, input, "replicated", "sharded", "sharded") },
  setup(ctx) {
    ctx.claim("partition", { plan: (unit, hc) => makePlan(unit, groupFor(unit, hc), "replicated", "sharded", "sharded") });
    ctx.claim("reduce", createBucketedReducer());
  },
});

export default zero2;
