/**
 * Every numeric key of a Hugging Face config.json is bounded to what the engine can use
 * (spec-model.ts MODEL_BOUNDS): a value past it is refused naming the key, before any arithmetic or
 * allocation reaches it. Issue 32's fuzz found `initializer_range` 1e63 reaching the normal init
 * (which threw a plain Error: a crash with a stack trace).
 */
import { describe, expect, test } from "bun:test";
import { ConfigError, resolveModelConfig } from "../../src/config/index.ts";

function issues(raw: unknown): string[] {
  try {
    resolveModelConfig(raw, "config.json");
    return [];
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return e.issues.map((i) => `${i.path}: ${i.message}`);
  }
}

const TINY = { model_type: "llama", vocab_size: 64, hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1, num_attention_heads: 2 };

describe("model config numeric bounds", () => {
  test("initializer_range 1e63 (and 0, 1e-40) is refused naming the key", () => {
    for (const v of [1e63, 1e-40]) {
      const got = issues({ ...TINY, initializer_range: v });
      expect(got.length).toBe(1);
      expect(got[0]).toStartWith("config.json.initializer_range: out of range");
    }
    expect(issues({ ...TINY, initializer_range: 0.02 })).toEqual([]);
  });

  test("sizes past 2^31 − 1, positions past 2^24 and reals past f32 are refused naming the key", () => {
    const cases: [string, unknown][] = [
      ["hidden_size", 2 ** 31],
      ["vocab_size", 1e15],
      ["num_hidden_layers", 2 ** 40],
      ["max_position_embeddings", 2 ** 24 + 1],
      ["rope_theta", 1e300],
      ["rms_norm_eps", 1e39],
      ["bos_token_id", 2 ** 32],
      ["head_dim", 2 ** 32],
    ];
    for (const [k, v] of cases) {
      const got = issues({ ...TINY, [k]: v });
      expect(got.some((m) => m.startsWith(`config.json.${k}: out of range`))).toBe(true);
    }
    const moe = { model_type: "mixtral", vocab_size: 64, hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 2 };
    expect(issues({ ...moe, router_aux_loss_coef: 1e300 })[0]).toStartWith("config.json.router_aux_loss_coef: out of range");
    expect(issues({ ...moe, num_local_experts: 2 ** 31 })[0]).toStartWith("config.json.num_local_experts: out of range");
  });

  test("real configs' values stay inside the bounds", () => {
    // Llama-4-Scout's 10,485,760 positions and a 1e8 RoPE base are within them
    expect(issues({ ...TINY, max_position_embeddings: 10_485_760, rope_theta: 1e8, rms_norm_eps: 1e-5 })).toEqual([]);
  });
});
