/**
 * Plugin composition through a job's config (core/src/engine/plugin-loader.ts, core/src/hooks/plugin.ts):
 * a third-party plugin listed in `plugins` that claims a hook a ZeRO stage already claims is a
 * config error naming both; declared conflicts between built-ins are errors; a plugin that wraps
 * instead composes and is recorded as the hook's second owner.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { LocalCommunicator } from "../../src/comm/local/local-communicator.ts";
import { createLocalWorldMemory } from "../../src/comm/local/memory.ts";
import { resolveJobConfig } from "../../src/config/index.ts";
import { Engine } from "../../src/engine/engine.ts";
import { importPlugin, pluginsForJob } from "../../src/engine/plugin-loader.ts";
import { PluginConflictError } from "../../src/hooks/plugin.ts";
import { ConfigError } from "../../src/config/errors.ts";
import { tinyJob } from "./fixtures.ts";

const CLAIM_REDUCE = new URL("./plugins/claim-reduce.ts", import.meta.url).pathname;
const GRAD_NOISE = new URL("../../../examples/plugins/grad-noise/src/index.ts", import.meta.url).pathname;

async function create(job: Record<string, unknown>, extra: string[] = []): Promise<Engine> {
  const { config } = resolveJobConfig({ ...job, world_size: 1 });
  const comm = new LocalCommunicator(createLocalWorldMemory(1, 1 << 20), 0);
  const plugins = [...(await pluginsForJob(config)), ...(await Promise.all(extra.map((p) => importPlugin(p))))];
  return Engine.create({ config, comm, backend: new CpuBackend(), plugins, log: () => {} });
}

describe("plugin composition in a job", () => {
  for (const stage of [1, 2, 3]) {
    test(`zero${stage} + a plugin claiming "reduce" (job.plugins) → a config error naming both, from the declarations alone`, async () => {
      const { config } = resolveJobConfig({ ...tinyJob({ zero_optimization: { stage }, plugins: [CLAIM_REDUCE] }), world_size: 1 });
      // pluginsForJob checks the set before any engine (or data) exists
      const err = await pluginsForJob(config).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues.map((i) => i.path)).toEqual(["plugins"]);
      const msg = (err as Error).message;
      expect(msg).toContain(`"zero${stage}"`);
      expect(msg).toContain(`"acme-allreduce"`);
      expect(msg).toContain(`"reduce"`);
    });
  }

  test("stage 0 + the claiming plugin is fine (core's defaults may be claimed freely)", async () => {
    const e = await create(tinyJob({ zero_optimization: { stage: 0 }, plugins: [CLAIM_REDUCE] }));
    expect(e.hookOwners.reduce).toBe("acme-allreduce");
    e.destroy();
  });

  test("two ZeRO stages at once are a declared conflict naming both", async () => {
    const err = await create(tinyJob({ zero_optimization: { stage: 3 } }), ["zero2"]).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(PluginConflictError);
    expect((err as Error).message).toMatch(/"zero3" and "zero2" cannot be combined|"zero2" and "zero3" cannot be combined/);
  });

  test("zero3 + a wrapping plugin (grad-noise) compose: owners record both", async () => {
    const e = await create(tinyJob({ zero_optimization: { stage: 3 }, plugins: [GRAD_NOISE] }));
    expect(e.hookOwners.reduce).toBe("zero3+grad-noise");
    expect(e.hookOwners.gather).toBe("zero3");
    expect(e.hookOwners.partition).toBe("zero3");
    e.destroy();
  });

  test("a plugins entry that is not a plugin is an error naming it", async () => {
    await expect(create(tinyJob({ plugins: [new URL("./compare.ts", import.meta.url).pathname] }))).rejects.toThrow(/compare\.ts.*exports no plugin/);
    await expect(create(tinyJob({ plugins: ["./no/such/plugin.ts"] }))).rejects.toThrow(/cannot load "\.\/no\/such\/plugin\.ts"/);
  });
});
