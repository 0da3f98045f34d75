/** qwen3_moe config keys (Transformers 5 names and the older `num_experts`), its parameter count,
 * and AutoEP's preset check (a preset of another family is an error naming both). */
import { describe, expect, test } from "bun:test";
import { loadStateDict as readSafetensors } from "../../src/checkpoint/hf-load.ts";
import { ConfigError, resolveJobConfig, resolveModelConfig } from "../../src/config/index.ts";
import { moeShape } from "../../src/config/moe-shape.ts";
import { countParameters } from "../../src/config/param-count.ts";

const fixture = async () => JSON.parse(await Bun.file("core/test/fixtures/qwen3_moe/config.json").text()) as Record<string, unknown>;

function issues(f: () => unknown): readonly { path: string; message: string }[] {
  try {
    f();
  } catch (e) {
    if (e instanceof ConfigError) return e.issues;
    throw e;
  }
  throw new Error("expected a ConfigError");
}

describe("qwen3_moe config", () => {
  test("the fixture's config.json resolves; MoE layers follow mlp_only_layers / decoder_sparse_step", async () => {
    const c = resolveModelConfig(await fixture()).config;
    expect(moeShape(c)).toEqual({ numExperts: 6, topK: 2, expertIntermediate: 24, layers: [0, 2] });
    const c2 = resolveModelConfig({ ...(await fixture()), mlp_only_layers: [], decoder_sparse_step: 2 }).config;
    expect(moeShape(c2)!.layers).toEqual([1]);
  });
  test("parameter count equals the elements stored by save_pretrained", async () => {
    const c = resolveModelConfig(await fixture()).config;
    let n = 0;
    for (const t of readSafetensors("core/test/fixtures/qwen3_moe/model.safetensors").values()) n += t.data.length;
    const p = countParameters(c);
    expect(p.total).toBe(n);
    expect(p.expert).toBe(2 * 6 * 3 * 32 * 24);
    expect(p.total - p.activePerToken).toBe(2 * (6 - 2) * 3 * 32 * 24);
  });
  test("older configs' num_experts is num_local_experts; mixtral-only keys and bad layers are named", async () => {
    const raw = await fixture();
    const { num_local_experts: _, ...rest } = raw;
    expect((resolveModelConfig({ ...rest, num_experts: 6 }).config as { num_local_experts: number }).num_local_experts).toBe(6);
    const bad = issues(() => resolveModelConfig({ ...raw, router_jitter_noise: 0 }));
    expect(bad.map((i) => i.path)).toEqual(["model.router_jitter_noise"]);
    expect(bad[0]!.message).toContain(`only for model_type "mixtral"`);
    expect(issues(() => resolveModelConfig({ ...raw, mlp_only_layers: [7] })).map((i) => i.path)).toEqual(["model.mlp_only_layers[0]"]);
    expect(issues(() => resolveModelConfig({ ...raw, mlp_only_layers: [0, 1, 2] }))[0]!.message).toContain("no layer has experts");
    expect(issues(() => resolveModelConfig({ ...raw, use_sliding_window: true }))[0]!.path).toBe("model.use_sliding_window");
  });
});

describe("AutoEP preset_model", () => {
  const mixtral = { model_type: "mixtral", vocab_size: 256, hidden_size: 16, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, num_local_experts: 4 };
  test("a preset of another family is an error naming both (no longer accepted silently)", () => {
    const got = issues(() => resolveJobConfig({ model: mixtral, world_size: 2, train_micro_batch_size_per_gpu: 1, data: { seq_len: 8 }, expert_parallel: { enabled: true, autoep_size: 2, preset_model: "qwen3_moe" } }));
    expect(got.map((i) => i.path)).toEqual(["expert_parallel.preset_model"]);
    expect(got[0]!.message).toContain(`preset "qwen3_moe"`);
    expect(got[0]!.message).toContain(`model_type is "mixtral"`);
  });
  test("null preset takes the model's family; a qwen3_moe model with its preset resolves", async () => {
    const job = resolveJobConfig({ model: mixtral, world_size: 2, train_micro_batch_size_per_gpu: 1, data: { seq_len: 8 }, expert_parallel: { enabled: true, autoep_size: 2 } }).config;
    expect(job.expert_parallel.preset_model).toBe("mixtral");
    expect(job.moe!.ep_size).toBe(2);
    const q = { ...(await fixture()), vocab_size: 256 };
    const j2 = resolveJobConfig({ model: q, world_size: 2, train_micro_batch_size_per_gpu: 1, data: { seq_len: 8 }, expert_parallel: { enabled: true, autoep_size: 2, preset_model: "qwen3_moe" } }).config;
    expect(j2.moe!.ep_size).toBe(2);
    expect(j2.moe!.k).toBe(2);
  });
});
