/**
 * The per-unit "reduction done" event (core/src/engine/grad-reduced.ts; the offload hook's
 * `gradReduced`): each trainable unit gets exactly one per step — during the last micro-batch's
 * backward when the reduce hook is built on core's helpers (they announce through
 * `ctx.gradReduced`), else right after `reduce.finish` (the engine announces what was not) — never
 * in an earlier micro-batch, never for a frozen unit, and never twice.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { resolveJobConfig } from "../../src/config/resolve.ts";
import { Engine, type TrainMicroBatch } from "../../src/engine/engine.ts";
import { accumulateLocal } from "../../src/engine/grad-reduce.ts";
import type { EngineHooks } from "../../src/engine/hooks.ts";
import type { SetupContext } from "../../src/engine/plugin-context.ts";
import { definePlugin } from "../../src/hooks/plugin.ts";
import { createSoloCommunicator, microBatch, tinyJob, tinyLlamaModel } from "../../src/testing.ts";

type Hooks = EngineHooks & Record<string, unknown>;

async function run(customReduce: boolean, freeze: string[] = []): Promise<{ events: string[][]; trainable: string[] }> {
  const { config } = resolveJobConfig({ ...tinyJob({ model: tinyLlamaModel(), gradient_accumulation_steps: 3, freeze }), world_size: 1 });
  let cur: string[] = [];
  const probe = definePlugin<Hooks, SetupContext>({
    name: "acme-probe",
    claims: customReduce ? ["offload", "reduce"] : ["offload"],
    setup(ctx) {
      ctx.claim("offload", {
        optimizerDevice: () => "device",
        gradReduced: (u, hc) => void cur.push(`${u.name} ${hc.phase.backward ? "bwd" : "after"} ${hc.micro.index}`),
      });
      if (customReduce) {
        // a reduce hook that never announces (world 1: accumulating is the whole reduction)
        ctx.claim("reduce", { gradReady: (u, hc) => accumulateLocal(hc, u), finish: () => void cur.push("finish") });
      } else {
        ctx.wrap("reduce", (prev) => ({ gradReady: (u, hc) => prev.gradReady(u, hc), finish: async (hc) => { await prev.finish(hc); cur.push("finish"); } }));
      }
    },
  });
  const engine = await Engine.create({ config, comm: createSoloCommunicator(), backend: new CpuBackend(), plugins: [probe], log: () => {} });
  const events: string[][] = [];
  for (let s = 0; s < 2; s++) {
    const mbs: TrainMicroBatch[] = [];
    for (let a = 0; a < 3; a++) mbs.push(microBatch(s, a, config.train_micro_batch_size_per_gpu, config.data.seq_len, config.model.vocab_size));
    cur = [];
    await engine.trainBatch(mbs);
    events.push(cur);
  }
  const trainable = engine.units().filter((u) => u.trainable).map((u) => u.name);
  engine.destroy();
  return { events, trainable };
}

describe("gradReduced", () => {
  test("core's reduce helpers announce each unit during the last micro-batch's backward, once", async () => {
    const { events, trainable } = await run(false);
    for (const ev of events) {
      const fin = ev.indexOf("finish");
      expect(fin).toBe(ev.length - 1);
      expect(ev.slice(0, fin).map((e) => e.split(" ")[0]).sort()).toEqual([...trainable].sort());
      expect(ev.slice(0, fin).every((e) => e.endsWith(" bwd 2"))).toBe(true);
    }
  });

  test("a reduce hook that never announces: the engine announces every unit right after finish", async () => {
    const { events, trainable } = await run(true);
    for (const ev of events) {
      expect(ev[0]).toBe("finish");
      expect(ev.slice(1).map((e) => e.split(" ")[0])).toEqual(trainable);
      expect(ev.slice(1).every((e) => e.endsWith(" after 2"))).toBe(true);
    }
  });

  test("a frozen unit gets no event", async () => {
    const { events, trainable } = await run(false, ["model.embed_tokens.*"]);
    expect(trainable).not.toContain("embed");
    for (const ev of events) expect(ev.filter((e) => e.startsWith("embed "))).toEqual([]);
    expect(events[0]!.length).toBe(trainable.length + 1);
  });
});
