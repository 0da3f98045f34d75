/**
 * 16-bit experts adding their gradients straight into the engine's accumulator (nn/unit.ts
 * `gradInto`, set when the reduce hook `accumulatesLocally`: core's data parallelism, ZeRO-1, and
 * ZeRO-2/3 where the experts' group is one rank)
 * against the micro-batch gradient path every unit took before (a reduce hook doing the same
 * `accumulateLocal` without declaring it): a bf16 Mixtral at awkward sizes on the cpu backend —
 * one micro-batch per step: losses and every parameter bit for bit after 3 steps; 3 micro-batches
 * per step: the accumulator rounds once per micro-batch instead of twice, so within bf16 rounding
 * (losses 1e-3 relative, observed ≤ 3e-6). And what it is for: no expert micro-batch gradient
 * buffer is allocated.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, type Backend } from "@zeromoe/kernels";
import { resolveJobConfig } from "../../src/config/resolve.ts";
import { Engine, type TrainMicroBatch } from "../../src/engine/engine.ts";
import { accumulateLocal, allReduceAccumulated } from "../../src/engine/grad-reduce.ts";
import type { EngineHooks } from "../../src/engine/hooks.ts";
import type { SetupContext } from "../../src/engine/plugin-context.ts";
import { pluginsForJob } from "../../src/engine/plugin-loader.ts";
import { definePlugin } from "../../src/hooks/plugin.ts";
import { createSoloCommunicator, gatherFullParams, microBatch, tinyJob } from "../../src/testing.ts";

type Hooks = EngineHooks & Record<string, unknown>;

/** core's data-parallel reduce, not declaring that it accumulates locally. */
const microGrads = definePlugin<Hooks, SetupContext>({
  name: "acme-micro-grads",
  claims: ["reduce"],
  setup(ctx) {
    ctx.claim("reduce", {
      gradReady: async (u, hc) => {
        accumulateLocal(hc, u);
        if (hc.isLastMicro) await allReduceAccumulated(hc, u);
      },
      finish: () => {},
    });
  },
});

const MODEL = {
  model_type: "mixtral", vocab_size: 257, hidden_size: 25, head_dim: 6, intermediate_size: 7, num_hidden_layers: 2,
  num_attention_heads: 3, num_key_value_heads: 1, num_local_experts: 5, num_experts_per_tok: 2, max_position_embeddings: 32,
};

async function run(direct: boolean, accum: number, stage = 0) {
  const { config } = resolveJobConfig({ ...tinyJob({ model: MODEL, bf16: { enabled: true }, gradient_accumulation_steps: accum, data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 11 }, zero_optimization: { stage } }), world_size: 1 });
  const be: Backend = new CpuBackend();
  const comm = createSoloCommunicator();
  const plugins = stage > 0 ? await pluginsForJob(config) : direct ? [] : [microGrads];
  const engine = await Engine.create({ config, comm, backend: be, plugins, log: () => {} });
  const experts = engine.model.units.units.filter((u) => u.kind === "expert");
  expect(experts.length).toBe(10);
  expect(experts.every((u) => (u.gradInto !== null) === direct)).toBe(true);
  // an expert's gradient at its gradReady: none of its own under `gradInto`
  let expertMicroGrads = 0;
  const ready = engine.model.units.hooks.gradReady;
  engine.model.units.hooks = { ...engine.model.units.hooks, gradReady: (u) => { if (u.kind === "expert" && u.grad) expertMicroGrads++; return ready(u); } };
  // gradient buffers of an expert's size allocated during the steps (micro-batch gradients)
  let expertGradAllocs = 0;
  const alloc = be.alloc.bind(be);
  be.alloc = (dt, n, tag, c) => {
    if (tag === "grad" && n === experts[0]!.numel) expertGradAllocs++;
    return alloc(dt, n, tag, c);
  };
  const losses: number[] = [];
  for (let s = 0; s < 3; s++) {
    const mbs: TrainMicroBatch[] = [];
    for (let a = 0; a < accum; a++) mbs.push(microBatch(s, a, config.train_micro_batch_size_per_gpu, config.data.seq_len, config.model.vocab_size));
    losses.push((await engine.trainBatch(mbs)).loss);
  }
  be.alloc = alloc;
  const params = await gatherFullParams(engine, comm);
  engine.destroy();
  return { losses, params, expertGradAllocs, expertMicroGrads };
}

describe("16-bit experts' gradients straight into the accumulator", () => {
  test("one micro-batch per step: losses and parameters bit for bit; no expert micro-batch gradient allocated", async () => {
    const ref = await run(false, 1);
    const got = await run(true, 1);
    expect(got.losses).toEqual(ref.losses);
    expect(got.params).toEqual(ref.params);
    expect(ref.expertMicroGrads).toBeGreaterThan(0);
    expect(got.expertMicroGrads).toBe(0);
    expect(ref.expertGradAllocs).toBeGreaterThanOrEqual(10 * 3); // every expert, every step
    expect(got.expertGradAllocs).toBe(0);
  }, 300_000);

  for (const stage of [1, 2, 3]) {
    test(`ZeRO-${stage} on one rank (a group of one: the shard is the whole unit): straight into it too, the same bits`, async () => {
      const ref = await run(false, 1);
      const got = await run(true, 1, stage);
      expect(got.losses).toEqual(ref.losses);
      expect(got.params).toEqual(ref.params);
      expect(got.expertGradAllocs).toBe(0);
    }, 300_000);
  }

  test("3 micro-batches per step: within bf16 rounding of the micro-batch path", async () => {
    const ref = await run(false, 3);
    const got = await run(true, 3);
    for (let i = 0; i < ref.losses.length; i++) expect(Math.abs(got.losses[i]! - ref.losses[i]!) / ref.losses[i]!).toBeLessThan(1e-3);
    console.log(`accumulation 3: losses ${got.losses.join(" ")} vs ${ref.losses.join(" ")}`);
  }, 300_000);
});
