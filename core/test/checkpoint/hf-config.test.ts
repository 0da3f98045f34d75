/** config.json for exported models (core/src/checkpoint/hf-config.ts). */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatHfConfigJson, hfConfigObject, writeHfConfig } from "../../src/checkpoint/hf-config.ts";
import { resolveModelConfig } from "../../src/config/index.ts";

const mixtral = resolveModelConfig({ model_type: "mixtral", vocab_size: 256, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, num_local_experts: 4, num_experts_per_tok: 2, rope_theta: 1e6, max_position_embeddings: 64 }).config;

test("float-typed keys are written as JSON floats (Transformers 5's strict dataclasses refuse 0 for a float)", () => {
  const text = formatHfConfigJson(hfConfigObject(mixtral, "bf16"));
  expect(text).toContain('"router_jitter_noise": 0.0');
  expect(text).toContain('"attention_dropout": 0.0');
  expect(text).toContain('"rope_theta": 1000000.0'); // top level and inside rope_parameters
  expect(text.match(/"rope_theta": 1000000\.0/g)!.length).toBe(2);
  expect(text).toContain('"num_local_experts": 4'); // integers stay integers
  const back = JSON.parse(text);
  expect(back.architectures).toEqual(["MixtralForCausalLM"]);
  expect(back.dtype).toBe("bfloat16");
  expect(back.rms_norm_eps).toBe(mixtral.rms_norm_eps);
  expect(back.head_dim).toBe(8);
});

test("a written config reads back through the model-config resolver as the same model", () => {
  const dir = mkdtempSync(join(tmpdir(), "zeromoe-hfcfg-"));
  try {
    const path = writeHfConfig(dir, mixtral, "f32");
    const raw = JSON.parse(readFileSync(path, "utf8"));
    const again = resolveModelConfig(raw).config as unknown as Record<string, unknown>;
    const want = mixtral as unknown as Record<string, unknown>;
    for (const k of ["model_type", "vocab_size", "hidden_size", "num_local_experts", "num_experts_per_tok", "rope_theta", "head_dim", "num_key_value_heads"]) {
      expect(again[k]).toBe(want[k]);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("qwen3_moe and qwen2_moe exports carry both expert-count names (Transformers 4: num_experts, 5: num_local_experts), equal, and read back", () => {
  const base = { vocab_size: 256, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, num_experts_per_tok: 2, moe_intermediate_size: 16, max_position_embeddings: 64 };
  for (const model_type of ["qwen3_moe", "qwen2_moe"]) {
    const cfg = resolveModelConfig({ model_type, ...base, num_experts: 6, ...(model_type === "qwen2_moe" ? { shared_expert_intermediate_size: 16 } : {}) }).config;
    const obj = JSON.parse(formatHfConfigJson(hfConfigObject(cfg, "bf16")));
    expect([obj.num_experts, obj.num_local_experts]).toEqual([6, 6]);
    // both names with one value read back (different values stay refused: job-config.test.ts)
    expect((resolveModelConfig(obj).config as { num_local_experts?: number }).num_local_experts).toBe(6);
    expect(() => resolveModelConfig({ ...obj, num_experts: 5 })).toThrow(/different values/);
  }
});
