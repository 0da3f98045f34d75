import { describe, expect, test } from "bun:test";
import { ConfigError, resolveJobConfig, resolveModelConfig } from "../src/config/index.ts";
import { llamaConfig, mixtralConfig } from "../src/models/config.ts";
import type { ModelConfig } from "../src/config/types.ts";

/** The ConfigError a call throws (fails the test if it does not throw one). */
function configError(f: () => unknown): ConfigError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

describe("HF configs", () => {
  test("defaults match transformers' LlamaConfig / MixtralConfig", () => {
    const l = llamaConfig({});
    expect([l.vocab_size, l.hidden_size, l.intermediate_size, l.num_hidden_layers, l.num_attention_heads, l.num_key_value_heads, l.head_dim]).toEqual([32000, 4096, 11008, 32, 32, 32, 128]);
    expect([l.rms_norm_eps, l.rope_theta, l.max_position_embeddings, l.tie_word_embeddings]).toEqual([1e-6, 10000, 2048, false]);
    const m = mixtralConfig({});
    expect([m.intermediate_size, m.num_key_value_heads, m.num_local_experts, m.num_experts_per_tok, m.router_aux_loss_coef]).toEqual([14336, 8, 8, 2, 0.001]);
    expect([m.rms_norm_eps, m.rope_theta, m.output_router_logits]).toEqual([1e-5, 1e6, false]);
  });
  test("Transformers 5 rope_parameters, null head_dim and kv heads", () => {
    const c = mixtralConfig({ hidden_size: 32, num_attention_heads: 4, head_dim: null, num_key_value_heads: 2, rope_parameters: { rope_theta: 1234, rope_type: "default" } });
    expect([c.head_dim, c.rope_theta, c.num_key_value_heads]).toEqual([8, 1234, 2]);
    expect(llamaConfig({ num_key_value_heads: null, num_attention_heads: 8, hidden_size: 64 }).num_key_value_heads).toBe(8);
  });
  test("errors name the key", () => {
    expect(() => llamaConfig({ hidden_size: 30, num_attention_heads: 4 })).toThrow(/config\.hidden_size/);
    expect(() => llamaConfig({ num_attention_heads: 6, num_key_value_heads: 4, hidden_size: 48 })).toThrow(/config\.num_key_value_heads/);
    expect(() => mixtralConfig({ num_experts_per_tok: 9, num_local_experts: 8 })).toThrow(/num_experts_per_tok/);
    expect(() => llamaConfig({ rope_parameters: { rope_type: "ntk", rope_theta: 1 } })).toThrow(/rope_type/);
    expect(() => llamaConfig({ model_type: "mixtral" })).toThrow(/model_type/);
    expect(() => mixtralConfig({ vocab_size: "big" })).toThrow(/config\.vocab_size/);
  });
  test("one parser: llamaConfig/mixtralConfig, resolveModelConfig and the job's model section agree on HF fixtures", async () => {
    for (const name of ["llama", "mixtral"] as const) {
      const json = JSON.parse(await Bun.file(`core/test/fixtures/${name}/config.json`).text()) as Record<string, unknown>;
      const direct = resolveModelConfig(json, "model");
      const viaClass = name === "llama" ? llamaConfig(json, "model") : mixtralConfig(json, "model");
      expect(viaClass as ModelConfig).toEqual(direct.config);
      // a job needs vocab_size >= the byte tokenizer's 256 (the fixtures have 64)
      const viaJob = resolveJobConfig({ model: { ...json, vocab_size: 300 }, train_batch_size: 1, data: { seq_len: 16 } }).config.model;
      expect(viaJob).toEqual({ ...direct.config, vocab_size: 300 });
      // HF-only keys are accepted and reported as ignored, never silently dropped
      expect(direct.warnings.some((w) => w.startsWith("model.architectures: ignored"))).toBe(true);
    }
    const m = mixtralConfig(JSON.parse(await Bun.file("core/test/fixtures/mixtral/config.json").text()));
    expect([m.head_dim, m.rope_theta, m.num_key_value_heads, m.router_aux_loss_coef, m.output_router_logits]).toEqual([8, 1e6, 2, 0.02, true]);
  });
  test("options the models lack are refused by the shared schema, naming the key", () => {
    const e = configError(() => mixtralConfig({ attention_bias: true, router_jitter_noise: 0.01, sliding_window: 4096, hidden_size: 31, num_attention_heads: 2 }));
    const byPath = Object.fromEntries(e.issues.map((i) => [i.path, i.message]));
    expect(byPath["config.attention_bias"]).toMatch(/not supported; expected false, got true/);
    expect(byPath["config.router_jitter_noise"]).toMatch(/not supported; expected 0, got 0\.01/);
    expect(byPath["config.sliding_window"]).toMatch(/not supported; expected null, got 4096/);
    expect(byPath["config.hidden_size"]).toMatch(/not divisible by num_attention_heads 2/);
    expect(configError(() => llamaConfig({ mlp_bias: true })).issues.map((i) => i.path)).toEqual(["config.mlp_bias"]);
    // the job path reports the same issue at the same key
    expect(configError(() => resolveJobConfig({ model: { model_type: "llama", attention_bias: true } })).issues.map((i) => i.path)).toContain("model.attention_bias");
    // a misspelt key gets a did-you-mean; a Mixtral-only key in a Llama config is named
    expect(configError(() => llamaConfig({ hiden_size: 64 })).message).toContain('config.hiden_size: unknown key; did you mean "hidden_size"?');
    expect(configError(() => llamaConfig({ num_local_experts: 4 })).message).toContain('config.num_local_experts: only for model_type "mixtral"');
    expect(configError(() => mixtralConfig({ model_type: "llama" }, "m")).issues[0]).toEqual({ path: "m.model_type", message: 'expected "mixtral" (this reads MixtralConfig), got "llama"' });
  });
});
