import { describe, expect, test } from "bun:test";
import { llamaConfig, mixtralConfig } from "../src/models/config.ts";

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
    expect(() => llamaConfig({ rope_parameters: { rope_type: "yarn", rope_theta: 1 } })).toThrow(/rope_type/);
    expect(() => llamaConfig({ model_type: "mixtral" })).toThrow(/model_type/);
    expect(() => mixtralConfig({ vocab_size: "big" })).toThrow(/config\.vocab_size/);
  });
});
