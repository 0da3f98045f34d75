/**
 * Test-only third-party plugin that CLAIMS the `reduce` hook (instead of wrapping it) without
 * listing anyone in `overrides`: combined with zero1/zero2/zero3 (which claim `reduce` too) the
 * job must fail with a config error naming both plugins.
 */
import { definePlugin, defaultHooks, type EngineEnv, type EngineHooks } from "../../../src/index.ts";

export default definePlugin<EngineHooks & Record<string, unknown>, EngineEnv>({
  name: "acme-allreduce",
  claims: ["reduce"],
  setup(ctx) {
    ctx.claim("reduce", defaultHooks().reduce);
  },
});
