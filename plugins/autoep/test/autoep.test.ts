/**
 * AutoEP plugin: every DeepSpeed `expert_parallel` key acts or is refused naming it; the plugin is
 * selected by the registry, finds the MoE blocks of qwen3_moe (MoE layers 0 and 2, layer 1 dense)
 * and mixtral by preset and replaces them keeping weights and numerics (world 1: parameters after
 * 3 AdamW steps bit-identical to the run without AutoEP); route_norm acts (false ≡ the model with
 * norm_topk_prob false, bit for bit); a moe_layer_pattern missing a block is an error naming it;
 * autoep_size 1, 2 and 4 at ZeRO 0–3 equal world 1 (1e-5 after 3 steps, as docs/moe.md states
 * for ep_size > 1).
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { ConfigError, resolveJobConfig } from "@zeromoe/core/config";
import { Engine, pluginsForJob } from "@zeromoe/core";
import { CpuBackend } from "@zeromoe/kernels";
import { createSoloCommunicator, FIXTURE_ENTRY, launch, tinyJob, tinyLlamaModel, awkwardModel, type TrainOut } from "@zeromoe/core/testing";
import { autoepStateOf } from "../src/index.ts";

const QWEN = {
  model_type: "qwen3_moe", vocab_size: 256, hidden_size: 16, intermediate_size: 7, num_hidden_layers: 3,
  num_attention_heads: 2, num_key_value_heads: 1, head_dim: 6, num_local_experts: 4, num_experts_per_tok: 2,
  moe_intermediate_size: 5, norm_topk_prob: true, mlp_only_layers: [1], output_router_logits: true, router_aux_loss_coef: 0.02,
  max_position_embeddings: 64,
};
const job = (over: Record<string, unknown> = {}, model: Record<string, unknown> = QWEN) => tinyJob({ model, ...over });
const autoep = (over: Record<string, unknown> = {}) => ({ expert_parallel: { enabled: true, autoep_size: 1, preset_model: "qwen3_moe", ...over } });

function issues(raw: Record<string, unknown>): string[] {
  try {
    resolveJobConfig(raw);
  } catch (e) {
    if (e instanceof ConfigError) return e.issues.map((i) => `${i.path}: ${i.message}`);
    throw e;
  }
  return [];
}

describe("expert_parallel keys: each acts or is refused naming it", () => {
  const refused: [string, unknown][] = [
    ["router_pattern", "router"], ["expert_pattern", "mlp"], ["grouped_mm_backend", "cutlass"], ["grouped_mm_backend", "torch"],
    ["score_apply", "pre"], ["route_scale", 2], ["num_expert_groups", 2], ["num_limited_groups", 1], ["score_func", "sigmoid"],
    ["top_k", 3], ["load_balance_coeff", -1], ["routed_scaling_factor", 2.5], ["expert_w1", "w1"], ["expert_w2", "w2"],
    ["expert_w3", "w3"], ["num_experts_attr", "n_routed_experts"], ["top_k_attr", "k"], ["has_shared_experts", true],
    ["shared_experts_pattern", "shared_expert"], ["moe_layer_pattern", "model\\.layers\\.(["], ["preset_model", "mixtral"],
  ];
  for (const [key, value] of refused) {
    test(`${key}: ${JSON.stringify(value)} is refused`, () => {
      const got = issues(job(autoep({ [key]: value })));
      expect(got.some((m) => m.startsWith(`expert_parallel.${key}:`))).toBe(true);
    });
  }
  test("expert_w3 null needs the fused expert_w1", () => {
    expect(issues(job(autoep({ expert_w3: null })))[0]).toStartWith("expert_parallel.expert_w3:");
    expect(issues(job(autoep({ expert_w1: "gate_up_proj", expert_w2: "down_proj", expert_w3: null })))).toEqual([]);
  });
  test("values that agree with the family are accepted and resolved", () => {
    const { config } = resolveJobConfig(job(autoep({
      preset_model: null, router_pattern: "gate", expert_pattern: "experts", expert_w1: "gate_proj", expert_w3: "up_proj", num_experts_attr: "num_experts",
      top_k_attr: "num_experts_per_tok", has_shared_experts: false, score_func: "softmax", score_apply: "post", grouped_mm_backend: "sequential", top_k: 2,
    })));
    const ep = config.expert_parallel;
    expect(ep.preset_model).toBe("qwen3_moe");
    expect(ep.top_k).toBe(2);
    expect(ep.route_norm).toBe(true);
    expect(ep.routed_scaling_factor).toBe(1);
  });
  test("a dense model, autoep_size not dividing experts or world, moe.ep_size disagreeing", () => {
    expect(issues(tinyJob({ model: tinyLlamaModel(), ...autoep({ preset_model: null }) }))[0]).toStartWith("expert_parallel.enabled:");
    expect(issues({ ...job(autoep({ autoep_size: 3 })), world_size: 3 }).filter((m) => m.startsWith("expert_parallel.autoep_size:")).length).toBe(1);
    expect(issues({ ...job({ ...autoep({ autoep_size: 2 }), moe: { ep_size: 1 } }), world_size: 2 })[0]).toStartWith("moe.ep_size:");
  });
});

async function engineFor(raw: Record<string, unknown>) {
  const { config } = resolveJobConfig(raw);
  const logs: string[] = [];
  const plugins = await pluginsForJob(config);
  const engine = await Engine.create({ config, comm: createSoloCommunicator(), backend: new CpuBackend(), plugins, log: (m) => logs.push(m) });
  return { engine, logs, plugins };
}

describe("the plugin finds and replaces the MoE blocks", () => {
  test("qwen3_moe: selected by the registry, layers 0 and 2 replaced, same weights", async () => {
    const { engine, logs, plugins } = await engineFor(job(autoep()));
    expect(plugins.map((p) => p.name)).toEqual(["moe", "autoep"]);
    const st = autoepStateOf(engine.env)!;
    expect(st.blocks.map((b) => b.module)).toEqual(["model.layers.0.mlp", "model.layers.2.mlp"]);
    expect(st.blocks.map((b) => [b.numExperts, b.topK, b.hidden, b.ffn])).toEqual([[4, 2, 16, 5], [4, 2, 16, 5]]);
    const layers = (engine.model as unknown as { moeLayers: unknown[] }).moeLayers;
    expect(layers[0]).toBe(st.replaced.get(0));
    expect(layers[1]).toBeUndefined();
    expect(st.replaced.get(2)!.gate.name).toBe("model.layers.2.mlp.gate.weight");
    expect(logs.some((l) => l.startsWith("autoep: preset qwen3_moe: 2 MoE blocks"))).toBe(true);
    engine.destroy();
  });
  test("mixtral: blocks are block_sparse_moe", async () => {
    const { engine } = await engineFor(job(autoep({ preset_model: "mixtral" }), awkwardModel()));
    expect(autoepStateOf(engine.env)!.blocks.map((b) => b.module)).toEqual(["model.layers.0.block_sparse_moe", "model.layers.1.block_sparse_moe"]);
    engine.destroy();
  });
  test("a moe_layer_pattern that misses a block is an error naming the key and the block", async () => {
    await expect(engineFor(job(autoep({ moe_layer_pattern: "model\\.layers\\.0\\.mlp" })))).rejects.toThrow(/expert_parallel\.moe_layer_pattern: the MoE block model\.layers\.2\.mlp does not match/);
    const { engine } = await engineFor(job(autoep({ moe_layer_pattern: "model\\.layers\\.[02]\\.mlp" })));
    expect(autoepStateOf(engine.env)!.blocks.length).toBe(2);
    engine.destroy();
  });
});

async function train(world: number, raw: Record<string, unknown>): Promise<{ params: Map<string, number[]>; losses: number[] }> {
  const outs = (await launch({ worldSize: world, entry: FIXTURE_ENTRY, args: { job: { ...raw, gradient_accumulation_steps: 4 / world }, steps: 3 }, timeoutS: 240 })) as TrainOut[];
  const all = new Map<string, number[]>();
  for (const o of outs) for (const [n, v] of Object.entries(o.params)) all.set(n, v);
  return { params: all, losses: outs[0]!.losses };
}

function maxDiff(a: Map<string, number[]>, b: Map<string, number[]>): number {
  expect([...b.keys()].sort()).toEqual([...a.keys()].sort());
  let worst = 0;
  for (const [n, v] of a) {
    const w = b.get(n)!;
    for (let i = 0; i < v.length; i++) worst = Math.max(worst, Math.abs(v[i]! - w[i]!));
  }
  return worst;
}

describe("numerics", () => {
  test("autoep_size 1 at world 1 is bit-identical to the model without AutoEP; route_norm false ≡ norm_topk_prob false", async () => {
    const ref = await train(1, job());
    const got = await train(1, job(autoep()));
    expect(got.losses).toEqual(ref.losses);
    expect(maxDiff(ref.params, got.params)).toBe(0);
    const off = await train(1, job(autoep({ route_norm: false })));
    const plain = await train(1, job({}, { ...QWEN, norm_topk_prob: false }));
    expect(off.losses).toEqual(plain.losses);
    expect(off.losses).not.toEqual(ref.losses);
    expect(maxDiff(plain.params, off.params)).toBe(0);
  }, 300_000);

  test("autoep_size 1/2/4 at ZeRO 0–3 equal world 1 (1e-5 after 3 AdamW steps)", async () => {
    const ref = await train(1, job());
    for (const [world, size, stage] of [[2, 1, 1], [4, 2, 0], [4, 4, 2], [2, 2, 3]] as const) {
      const got = await train(world, job({ ...autoep({ autoep_size: size }), zero_optimization: { stage, stage3_param_persistence_threshold: 0 } }));
      expect(Math.abs(got.losses[0]! - ref.losses[0]!)).toBeLessThan(1e-6);
      const d = maxDiff(ref.params, got.params);
      console.log(`world ${world} autoep_size ${size} ZeRO-${stage}: max |Δparam| ${d.toExponential(2)}`);
      expect(d).toBeLessThan(1e-5);
    }
  }, 600_000);

  test("qwen2_moe (shared expert, q/k/v biases, dense layer 1): autoep_size 2 at ZeRO-1 and 4 at ZeRO-3 equal world 1 (1e-5)", async () => {
    const Q2 = {
      model_type: "qwen2_moe", vocab_size: 256, hidden_size: 16, intermediate_size: 7, num_hidden_layers: 3, num_attention_heads: 2,
      num_key_value_heads: 1, num_experts: 4, num_experts_per_tok: 2, moe_intermediate_size: 5, shared_expert_intermediate_size: 11,
      mlp_only_layers: [1], output_router_logits: true, router_aux_loss_coef: 0.02, max_position_embeddings: 64,
    };
    const ref = await train(1, job({}, Q2));
    for (const [world, size, stage] of [[2, 2, 1], [4, 4, 3]] as const) {
      const got = await train(world, job({ expert_parallel: { enabled: true, autoep_size: size }, zero_optimization: { stage, stage3_param_persistence_threshold: 0 } }, Q2));
      const d = maxDiff(ref.params, got.params);
      console.log(`qwen2_moe world ${world} autoep_size ${size} ZeRO-${stage}: max |Δparam| ${d.toExponential(2)}`);
      expect(d).toBeLessThan(1e-5);
    }
  }, 600_000);

  test("deepseek_v3 (MLA, sigmoid + bias + group-limited routing, shared expert, dense layer 0) and deepseek_v2: autoep 2 / ZeRO-1 and 4 / ZeRO-3 equal plain data parallelism (1e-5) and world 1 (1e-4)", async () => {
    const base = {
      vocab_size: 256, hidden_size: 16, intermediate_size: 7, num_hidden_layers: 3, num_attention_heads: 2, num_key_value_heads: 2,
      n_routed_experts: 8, num_experts_per_tok: 2, moe_intermediate_size: 5, n_shared_experts: 1, first_k_dense_replace: 1, n_group: 4, topk_group: 2,
      q_lora_rank: 6, kv_lora_rank: 5, qk_rope_head_dim: 4, qk_nope_head_dim: 3, v_head_dim: 5, max_position_embeddings: 64,
    };
    for (const model of [
      { ...base, model_type: "deepseek_v3", routed_scaling_factor: 2.5, norm_topk_prob: true },
      { ...base, model_type: "deepseek_v2", topk_method: "group_limited_greedy", routed_scaling_factor: 1.5, q_lora_rank: null },
    ]) {
      const ref = await train(1, job({}, model));
      for (const [world, size, stage] of [[2, 2, 1], [4, 4, 3]] as const) {
        const z = { stage, stage3_param_persistence_threshold: 0 };
        const got = await train(world, job({ expert_parallel: { enabled: true, autoep_size: size, num_expert_groups: 4, num_limited_groups: 2 }, zero_optimization: z }, model));
        // plain data parallelism at the same world size and stage: what EP must reproduce
        const dp = await train(world, job({ zero_optimization: z }, model));
        const d1 = maxDiff(ref.params, got.params);
        const dDp = maxDiff(dp.params, got.params);
        const dpVs1 = maxDiff(ref.params, dp.params);
        console.log(`${model.model_type} world ${world} autoep_size ${size} ZeRO-${stage}: max |Δparam| vs world 1 ${d1.toExponential(2)} (plain dp vs world 1 ${dpVs1.toExponential(2)}), vs plain dp ${dDp.toExponential(2)}`);
        expect(got.losses[0]).toBe(ref.losses[0]!);
        expect(dDp).toBeLessThan(1e-5);
        expect(d1).toBeLessThan(1e-4);
      }
    }
  }, 600_000);
});

describe("shared experts", () => {
  test("a deepseek_v3 with shared experts is found; presets of families with shared experts check them", async () => {
    const model = {
      model_type: "deepseek_v3", vocab_size: 256, hidden_size: 16, intermediate_size: 7, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 2,
      n_routed_experts: 4, num_experts_per_tok: 2, moe_intermediate_size: 5, n_shared_experts: 1, first_k_dense_replace: 1, n_group: 2, topk_group: 1,
      q_lora_rank: null, kv_lora_rank: 5, qk_rope_head_dim: 4, qk_nope_head_dim: 3, v_head_dim: 5, max_position_embeddings: 64,
    };
    const { engine } = await engineFor(job({ expert_parallel: { enabled: true, shared_experts_pattern: "shared_experts", has_shared_experts: true } }, model));
    expect(autoepStateOf(engine.env)!.blocks.map((b) => b.module)).toEqual(["model.layers.1.mlp"]);
    engine.destroy();
    const none = await engineFor(job({ expert_parallel: { enabled: true } }, { ...model, n_shared_experts: null }));
    expect(autoepStateOf(none.engine.env)!.blocks.length).toBe(1);
    none.engine.destroy();
  });
});
