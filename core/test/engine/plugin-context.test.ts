/**
 * The plugin contract (core/src/engine/plugin-context.ts) as a plugin sees it, on one rank in this
 * process: the setup context's verbs (job facts, modelUnits, metrics, manifest contributions with
 * restore/check, model transforms) and their order relative to partitioning; the per-call hook
 * context and unit handles (this micro-batch's gradient, isLastMicro, countsGradient); and the
 * Stateful engine (stateDict / loadStateDict) the checkpoint code uses instead of its fields.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { resolveJobConfig } from "../../src/config/resolve.ts";
import { Engine, type TrainMicroBatch } from "../../src/engine/engine.ts";
import type { EngineHooks, EnginePlugin } from "../../src/engine/hooks.ts";
import type { SetupContext } from "../../src/engine/plugin-context.ts";
import { definePlugin } from "../../src/hooks/plugin.ts";
import { createSoloCommunicator, microBatch, tinyJob, tinyLlamaModel } from "../../src/testing.ts";

type Hooks = EngineHooks & Record<string, unknown>;

function config(over: Record<string, unknown> = {}) {
  return resolveJobConfig({ ...tinyJob({ model: tinyLlamaModel(), gradient_accumulation_steps: 3, ...over }), world_size: 1 }).config;
}

function batches(cfg: ReturnType<typeof config>, step: number): TrainMicroBatch[] {
  const out: TrainMicroBatch[] = [];
  for (let a = 0; a < cfg.gradient_accumulation_steps; a++) out.push(microBatch(step, a, cfg.train_micro_batch_size_per_gpu, cfg.data.seq_len, cfg.model.vocab_size));
  return out;
}

async function engineWith(plugins: EnginePlugin[], restore: Record<string, unknown> | null = null, over: Record<string, unknown> = {}) {
  const cfg = config(over);
  const logs: string[] = [];
  const engine = await Engine.create({ config: cfg, comm: createSoloCommunicator(), backend: new CpuBackend(), plugins, restore, log: (m) => logs.push(m) });
  return { engine, cfg, logs };
}

describe("setup context", () => {
  test("job facts, modelUnits, and the order: setup → restore → transformModel → partition", async () => {
    const events: string[] = [];
    let seen: { rank: number; worldSize: number; units: string[]; name: string } | null = null;
    const p = definePlugin<Hooks, SetupContext>({
      name: "acme-order",
      setup(ctx) {
        seen = { rank: ctx.rank, worldSize: ctx.worldSize, units: ctx.modelUnits.map((u) => u.name), name: ctx.pluginName };
        events.push("setup");
        ctx.checkpoint.contribute("acme", { save: () => ({ n: 7 }), restore: (v) => events.push(`restore ${JSON.stringify(v)}`) });
        ctx.transformModel(() => events.push("transform"));
        ctx.wrap("partition", (prev) => ({
          plan: (u, hc) => {
            if (!events.includes("partition")) events.push("partition");
            return prev.plan(u, hc);
          },
        }));
      },
    });
    const { engine } = await engineWith([p], { acme: { n: 3 }, other: 1 });
    expect(events).toEqual(["setup", 'restore {"n":3}', "transform", "partition"]);
    expect(seen!).toEqual({ rank: 0, worldSize: 1, units: engine.model.units.units.map((u) => u.name), name: "acme-order" });
    expect(engine.manifestEntries()).toEqual({ acme: { n: 7 } });
    engine.destroy();
  });

  test("metrics: afterStep lines and warnings, summary sections; duplicate keys name both plugins", async () => {
    let calls = 0;
    const p = definePlugin<Hooks, SetupContext>({
      name: "acme-metrics",
      setup(ctx) {
        ctx.metrics.afterStep(() => ({ line: `acme ${++calls}`, warnings: calls === 2 ? ["two"] : [] }));
        ctx.metrics.summary("acme", () => ({ calls }));
      },
    });
    const { engine, cfg } = await engineWith([p]);
    for (let s = 0; s < 2; s++) {
      await engine.trainBatch(batches(cfg, s));
      const m = await engine.afterStep();
      expect(m).toEqual([{ line: `acme ${s + 1}`, warnings: s === 1 ? ["two"] : [] }]);
    }
    expect(engine.summarySections()).toEqual({ acme: { calls: 2 } });
    engine.destroy();
    const dup = (name: string) => definePlugin<Hooks, SetupContext>({ name, setup: (ctx) => ctx.metrics.summary("acme", () => 1) });
    await expect(engineWith([dup("a1"), dup("a2")])).rejects.toThrow(/plugins "a1" and "a2" both contribute the summary section "acme"/);
    const dupM = (name: string) => definePlugin<Hooks, SetupContext>({ name, setup: (ctx) => ctx.checkpoint.contribute("k", { save: () => 1 }) });
    await expect(engineWith([dupM("b1"), dupM("b2")])).rejects.toThrow(/plugins "b1" and "b2" both contribute the checkpoint manifest entry "k"/);
  });

  test("check: a contribution compares its saved entry after a load", async () => {
    const p = definePlugin<Hooks, SetupContext>({
      name: "acme-check",
      setup(ctx) {
        ctx.checkpoint.contribute("acme", { save: () => 5, check: (v) => (v === 5 ? null : `saved ${v}, now 5`) });
      },
    });
    const { engine } = await engineWith([p]);
    expect(engine.checkManifestEntries({ acme: 5 })).toEqual([]);
    expect(engine.checkManifestEntries({ acme: 4, other: 1 })).toEqual(["saved 4, now 5"]);
    expect(engine.checkManifestEntries({})).toEqual([]);
    engine.destroy();
  });
});

describe("hook context and unit handles", () => {
  test("gradReady sees this micro-batch's gradient, the micro position and the same handle the engine lists", async () => {
    const seen: { micro: number; last: boolean; hasGrad: boolean; same: boolean }[] = [];
    let counted: string[] = [];
    const p = definePlugin<Hooks, SetupContext>({
      name: "acme-observe",
      setup(ctx) {
        ctx.wrap("reduce", (prev) => ({
          async gradReady(unit, hc) {
            seen.push({ micro: hc.micro.index, last: hc.isLastMicro, hasGrad: unit.microGrad() !== null, same: hc.unit(unit.name) === unit && hc.holds(unit) });
            await prev.gradReady(unit, hc);
            if (unit.microGrad() !== null) throw new Error("the wrapped reduce did not consume the gradient");
          },
          async finish(hc) {
            await prev.finish(hc);
            counted = hc.units().filter((u) => u.countsGradient).map((u) => u.name);
          },
        }));
      },
    });
    const { engine, cfg } = await engineWith([p]);
    await engine.trainBatch(batches(cfg, 0));
    const units = engine.model.units.units.length;
    expect(seen.length).toBe(3 * units);
    expect(seen.every((s) => s.same && s.hasGrad)).toBe(true);
    expect(seen.map((s) => s.micro)).toEqual([0, 1, 2].flatMap((m) => new Array<number>(units).fill(m)));
    expect(seen.map((s) => s.last)).toEqual(seen.map((s) => s.micro === 2));
    // world 1, replicated: this rank counts every non-empty unit (the optimizer's rule)
    expect(counted).toEqual(engine.model.units.units.filter((u) => u.numel > 0).map((u) => u.name));
    engine.destroy();
  });
});

describe("Stateful engine", () => {
  test("stateDict after steps; loadStateDict restores counters, scheduler and loss scaler into another engine", async () => {
    const over = { scheduler: { type: "WarmupLR", params: { warmup_num_steps: 5 } } };
    const a = await engineWith([], null, over);
    for (let s = 0; s < 3; s++) await a.engine.trainBatch(batches(a.cfg, s));
    const sd = a.engine.stateDict();
    expect(sd.global_steps).toBe(3);
    expect(sd.applied_steps).toBe(3);
    const b = await engineWith([], null, over);
    b.engine.loadStateDict(JSON.parse(JSON.stringify(sd)));
    expect(b.engine.stateDict()).toEqual(sd);
    expect(b.engine.scheduler.getLr()).toBe(a.engine.scheduler.getLr());
    expect(() => b.engine.loadStateDict({ ...sd, applied_steps: 4 })).toThrow(/malformed step counters/);
    a.engine.destroy();
    b.engine.destroy();
  });
});
