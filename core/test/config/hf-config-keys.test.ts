/**
 * Keys of real Hugging Face config.json files: DeepSeek-V3's own file (deepseek-v3-config.json, the
 * Hub repository's config.json as published: remote-code keys topk_method "noaux_tc", scoring_func
 * "sigmoid", ep_size, aux_loss_alpha, seq_aux, moe_layer_freq; FP8 quantization_config; YaRN
 * rope_scaling, read) is read key by key: the routing keys at the values ZeroMoE implements are accepted,
 * other values refused with the reason; a quantized checkpoint is refused with a sentence saying to
 * use dequantized weights, for every family.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { ConfigError, resolveModelConfig } from "../../src/config/index.ts";

const V3 = JSON.parse(readFileSync(new URL("./deepseek-v3-config.json", import.meta.url), "utf8")) as Record<string, unknown>;

function issues(raw: unknown): string[] {
  try {
    resolveModelConfig(raw, "config.json");
    return [];
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return e.issues.map((i) => `${i.path}: ${i.message}`);
  }
}

describe("Hugging Face config.json keys", () => {
  test("DeepSeek-V3's real file: only the quantization is refused (its YaRN rope scaling is read: rope-yarn-longrope.test.ts)", () => {
    const got = issues(V3);
    expect(got.length).toBe(1);
    expect(got[0]).toStartWith("config.json.quantization_config: ");
    expect(got[0]).toContain("use the model's dequantized weights");
  });

  test("DeepSeek-V3's remote-code routing keys at Transformers' values are accepted; others refused with the reason", () => {
    const { quantization_config: _q, rope_scaling: _r, ...v3 } = V3;
    const r = resolveModelConfig({ ...v3, num_hidden_layers: 4, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 4, n_routed_experts: 8, num_experts_per_tok: 2, n_group: 4, topk_group: 2, moe_intermediate_size: 16, intermediate_size: 32, q_lora_rank: 16, kv_lora_rank: 16, qk_rope_head_dim: 8, qk_nope_head_dim: 8, v_head_dim: 8, vocab_size: 256 }, "config.json");
    expect(r.config.model_type).toBe("deepseek_v3");
    for (const k of ["ep_size", "aux_loss_alpha", "seq_aux"]) expect(r.warnings.some((w) => w.startsWith(`config.json.${k}: ignored`))).toBe(true);
    const bad = issues({ ...v3, topk_method: "greedy", scoring_func: "softmax", moe_layer_freq: 2 });
    expect(bad.find((m) => m.startsWith("config.json.topk_method: \"greedy\" is not supported"))).toContain("noaux_tc");
    expect(bad.find((m) => m.startsWith("config.json.scoring_func: \"softmax\" is not supported"))).toContain("sigmoid");
    expect(bad.find((m) => m.startsWith("config.json.moe_layer_freq: 2 is not supported"))).toBeDefined();
  });

  test("a quantized checkpoint is refused for every family, saying to use dequantized weights", () => {
    const gptq = { quant_method: "gptq", bits: 4, group_size: 128 };
    for (const model of [
      { model_type: "llama", quantization_config: gptq },
      { model_type: "qwen3_moe", quantization_config: gptq },
      { model_type: "mixtral", quantization_config: { quant_method: "awq", bits: 4 } },
    ]) {
      const got = issues(model);
      expect(got.length).toBe(1);
      expect(got[0]).toStartWith("config.json.quantization_config: ");
      expect(got[0]).toContain("ZeroMoE trains full-precision weights only: use the model's dequantized weights");
    }
    expect(issues({ model_type: "llama", quantization_config: null })).toEqual([]);
  });
});
