/**
 * zeromoe-plugin-grad-count — the plugin of docs/plugins.md's walkthrough, built as a package of
 * its own outside the repository by core/test/out-of-tree.test.ts.
 *
 * It WRAPS the `reduce` hook (so it composes with any ZeRO stage): it counts the unit gradients
 * that become ready on this rank during a step and, after the step's reduction, logs
 * `grad-count: <n> unit gradients over <m> micro-batches` on rank 0. Read-only: training is
 * bit-identical with and without it.
 */
import { definePlugin, type EngineHooks, type ReduceHook, type SetupContext } from "@zeromoe/core/plugin";

export default definePlugin<EngineHooks & Record<string, unknown>, SetupContext>({
  name: "grad-count",
  setup(ctx) {
    let ready = 0;
    ctx.wrap("reduce", (prev: ReduceHook): ReduceHook => ({
      gradReady: (unit, c) => {
        ready++;
        return prev.gradReady(unit, c);
      },
      finish: async (c) => {
        await prev.finish(c);
        if (c.rank === 0) c.log(`grad-count: ${ready} unit gradients over ${c.micro.count} micro-batches`);
        ready = 0;
      },
    }));
  },
});
