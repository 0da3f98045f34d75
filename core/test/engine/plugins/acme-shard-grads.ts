/**
 * Test-only third-party STAGE-LIKE plugin ("acme-shard-grads"): ZeRO-2's partitioning written
 * against the public contract only — gradients and optimizer states sharded over each unit's group,
 * each micro-batch's gradient reduce_scattered into the owned shard (one unit per collective, no
 * buckets) — with its own memory contribution. A job at `zero_optimization.stage: 0` that lists it
 * holds 2Ψ + 14Ψ/N bytes per rank (mixed) instead of stage 0's 16Ψ, and the memory check must say
 * so before anything is allocated (core/test/train/memory-check.test.ts).
 */
import { definePlugin, groupFor, makePlan, partitionedBytes, reduceScatterBucket, takeMicroGrad, type EngineHooks, type SetupContext } from "@zeromoe/core/plugin";

export default definePlugin<EngineHooks & Record<string, unknown>, SetupContext>({
  name: "acme-shard-grads",
  claims: ["partition", "reduce"],
  memory: { partition: (part, input) => partitionedBytes(part, input, "replicated", "sharded", "sharded") },
  setup(ctx) {
    if (ctx.config.zero_optimization.stage !== 0) throw new Error(`acme-shard-grads: use it with zero_optimization.stage 0 (it partitions the states itself), got stage ${ctx.config.zero_optimization.stage}`);
    ctx.claim("partition", { plan: (unit, hc) => makePlan(unit, groupFor(unit, hc), "replicated", "sharded", "sharded") });
    ctx.claim("reduce", {
      gradReady: async (unit, hc) => reduceScatterBucket(hc, [await takeMicroGrad(hc, unit)]),
      finish: () => {},
    });
  },
});
