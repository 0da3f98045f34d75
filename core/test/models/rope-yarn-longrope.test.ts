/**
 * YaRN and LongRoPE (core/src/models/rope-scaling.ts) against values computed independently:
 * scripts/hf-fixtures/rope_reference.py transcribes Transformers 5's _compute_yarn_parameters and
 * _compute_longrope_parameters with Python floats (float64) and wrote rope-scaling-reference.json;
 * both sides are float64, so the tables agree to 1e-12 relative (the formulas' own rounding).
 * The attention factor multiplies cos and sin in Transformers, so scores carry its square: a model
 * with attention_factor a equals the model whose query projection is scaled by a² (exact in
 * arithmetic; 1e-5 for f32 logits of O(1)), for Llama's fully rotated heads and for DeepSeek's MLA
 * (a² on the rotated part only, DeepSeek's mscale² on the whole score). DeepSeek-V3's real
 * config.json (YaRN) now loads but for its FP8 quantization.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { CpuBackend } from "@zeromoe/kernels";
import { ConfigError, resolveModelConfig } from "../../src/config/index.ts";
import type { RopeScalingConfig } from "../../src/config/types.ts";
import { createModel } from "../../src/engine/model-factory.ts";
import { deepseekSoftmaxMscale, ropeAttentionFactor, ropeFreqOf, ropeInverseFrequencies } from "../../src/models/rope-scaling.ts";
import { noGrad } from "../../src/tensor/index.ts";
import { tokens } from "../tiny-models.ts";

interface RefCase { head_dim: number; rope_theta: number; rope_scaling: Record<string, unknown>; max_position_embeddings: number; positions: number; inv_freq: number[]; attention_factor: number }
const REF = JSON.parse(readFileSync(new URL("./rope-scaling-reference.json", import.meta.url), "utf8")) as Record<string, RefCase>;

/** The scaling as the config reader makes it from a config.json (llama, the case's head dim). */
function readScaling(c: RefCase): RopeScalingConfig {
  const { config } = resolveModelConfig({ model_type: "llama", hidden_size: c.head_dim * 2, num_attention_heads: 2, head_dim: c.head_dim, intermediate_size: 8, num_hidden_layers: 1, vocab_size: 16, max_position_embeddings: c.max_position_embeddings, rope_theta: c.rope_theta, rope_scaling: c.rope_scaling }, "config.json");
  return config.rope_scaling!;
}

describe("YaRN and LongRoPE against the independent reference", () => {
  for (const [name, c] of Object.entries(REF)) {
    test(`${name}: inverse frequencies and attention factor`, () => {
      const sc = readScaling(c);
      const ours = ropeInverseFrequencies(c.head_dim, c.rope_theta, sc, { max_position_embeddings: c.max_position_embeddings, positions: c.positions });
      expect(ours.length).toBe(c.inv_freq.length);
      for (let i = 0; i < ours.length; i++) expect(Math.abs(ours[i]! - c.inv_freq[i]!) / c.inv_freq[i]!).toBeLessThan(1e-12);
      expect(ropeAttentionFactor({ rope_scaling: sc, max_position_embeddings: c.max_position_embeddings })).toBeCloseTo(c.attention_factor, 12);
      // the kernels' table is the same, chosen by the forward's positions
      const cfg = { rope_theta: c.rope_theta, rope_scaling: sc, head_dim: c.head_dim, max_position_embeddings: c.max_position_embeddings };
      expect(Array.from(ropeFreqOf(cfg, c.positions) as Float64Array)).toEqual(Array.from(ours));
    });
  }

  test("the three yarn regimes occur (extrapolated, interpolated, ramp) and longrope switches past the original context", () => {
    const f = REF.deepseek_v3!.inv_freq;
    const base = ropeInverseFrequencies(64, 10000, null);
    expect(f[0]).toBe(base[0]!);
    expect(f[31]! / base[31]!).toBeCloseTo(1 / 40, 12);
    expect(f.some((x, i) => x / base[i]! > 1 / 40 + 1e-9 && x / base[i]! < 1 - 1e-9)).toBe(true);
    const lr = REF.longrope_short!;
    const cfg = { rope_theta: 10000, rope_scaling: readScaling(lr), head_dim: 12, max_position_embeddings: lr.max_position_embeddings };
    expect(ropeFreqOf(cfg, 4096)).toBe(ropeFreqOf(cfg, 1));
    expect(ropeFreqOf(cfg, 4097)).not.toBe(ropeFreqOf(cfg, 4096));
    (ropeFreqOf(cfg, 4097) as Float64Array).forEach((x, i) => expect(Math.abs(x - REF.longrope_long!.inv_freq[i]!) / x).toBeLessThan(1e-12));
  });

  test("config errors name the key: bad factors, LongRoPE lists of the wrong length", () => {
    const issues = (rope_scaling: unknown): string[] => {
      try {
        resolveModelConfig({ model_type: "llama", hidden_size: 24, num_attention_heads: 2, intermediate_size: 8, num_hidden_layers: 1, vocab_size: 16, rope_scaling }, "config.json");
        return [];
      } catch (e) {
        if (!(e instanceof ConfigError)) throw e;
        return e.issues.map((i) => `${i.path}: ${i.message}`);
      }
    };
    expect(issues({ rope_type: "yarn" })[0]).toBe(`config.json.rope_scaling.factor: required for rope_type "yarn"`);
    expect(issues({ rope_type: "yarn", factor: 4, beta_fast: -1 })[0]).toStartWith("config.json.rope_scaling.beta_fast: expected a non-negative number");
    expect(issues({ rope_type: "yarn", factor: 4, truncate: "no" })[0]).toStartWith("config.json.rope_scaling.truncate: expected a boolean");
    expect(issues({ rope_type: "yarn", factor: 4, mscale: null, attention_factor: null })).toEqual([]);
    expect(issues({ rope_type: "longrope", short_factor: [1, 1], long_factor: [1, 2] })[0]).toBe("config.json.rope_scaling.short_factor: expected 6 factors (head_dim 12 / 2), got 2");
    expect(issues({ rope_type: "longrope", short_factor: [1, 1, 1, 1, 1, 1], long_factor: [1, 2, 3] })[0]).toStartWith("config.json.rope_scaling.long_factor: must have as many factors as short_factor (6)");
    expect(issues({ rope_type: "longrope", short_factor: [1, 1, "x", 1, 1, 1], long_factor: [1, 1, 1, 1, 1, 1] })[0]).toStartWith("config.json.rope_scaling.short_factor: expected a non-empty list of positive numbers");
  });

  test("DeepSeek-V3's real config.json: its YaRN is read (only the FP8 quantization is refused); mscale² = (0.1 ln 40 + 1)²", () => {
    const v3 = JSON.parse(readFileSync(new URL("../config/deepseek-v3-config.json", import.meta.url), "utf8")) as Record<string, unknown>;
    let msgs: string[] = [];
    try {
      resolveModelConfig(v3, "config.json");
    } catch (e) {
      msgs = (e as ConfigError).issues.map((i) => i.path);
    }
    expect(msgs).toEqual(["config.json.quantization_config"]);
    const { quantization_config: _q, ...rest } = v3;
    const c = resolveModelConfig(rest, "config.json").config;
    expect(c.rope_scaling).toEqual({ rope_type: "yarn", beta_fast: 32, beta_slow: 1, factor: 40, mscale: 1, mscale_all_dim: 1, original_max_position_embeddings: 4096 } as never);
    expect(ropeAttentionFactor(c)).toBe(1);
    expect(deepseekSoftmaxMscale(c)).toBeCloseTo(0.1 * Math.log(40) + 1, 14);
    const ref = REF.deepseek_v3!.inv_freq;
    (ropeFreqOf(c) as Float64Array).forEach((x, i) => expect(Math.abs(x - ref[i]!) / ref[i]!).toBeLessThan(1e-12));
  });
});

/** Logits of `raw`'s model (seeded) on fixed ids, with `scaleRows(name, weights)` applied to the weights first. */
async function logitsOf(raw: Record<string, unknown>, scaleRows?: (name: string, w: Float32Array, shape: readonly number[]) => void): Promise<Float32Array> {
  const be = new CpuBackend();
  const cfg = resolveModelConfig(raw, "config").config;
  const m = createModel(be, cfg, { seed: 5 });
  if (scaleRows) {
    for (const u of m.units.units) for (const p of u.params) {
      const w = (await be.read(p.tensor.view, p.numel)) as Float32Array;
      const copy = Float32Array.from(w);
      scaleRows(p.name, copy, p.shape);
      be.write(p.tensor.view, copy);
    }
  }
  const [B, S] = [2, 9];
  const ids = tokens(B * S, cfg.vocab_size, "yarn-attn");
  const out = await noGrad(() => m.forward({ inputIds: ids, labels: ids, batch: B, seq: S, returnLogits: true }));
  const l = (await out.logits!.toArray()) as Float32Array;
  m.destroy();
  return l;
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i]! - b[i]!));
  return d;
}

describe("the attention factor reaches the scores squared", () => {
  test("llama: yarn attention_factor a equals q_proj × a² with attention_factor 1", async () => {
    const a = 1.7;
    const base = { model_type: "llama", vocab_size: 31, hidden_size: 20, intermediate_size: 24, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 64, initializer_range: 0.3 };
    const yarn = { rope_type: "yarn", factor: 4, original_max_position_embeddings: 16 };
    const got = await logitsOf({ ...base, rope_scaling: { ...yarn, attention_factor: a } });
    const want = await logitsOf({ ...base, rope_scaling: { ...yarn, attention_factor: 1 } }, (n, w) => {
      if (n.endsWith("q_proj.weight")) for (let i = 0; i < w.length; i++) w[i] = w[i]! * a * a;
    });
    const unscaled = await logitsOf({ ...base, rope_scaling: { ...yarn, attention_factor: 1 } });
    expect(maxDiff(got, want)).toBeLessThan(1e-5);
    expect(maxDiff(got, unscaled)).toBeGreaterThan(1e-3); // the factor matters at these weights
  });

  test("deepseek_v3 MLA: a² on the rotated part, mscale² on the whole score", async () => {
    const a = 1.4;
    const k = 0.6; // mscale_all_dim
    const factor = 8;
    const m = 0.1 * k * Math.log(factor) + 1;
    const [H, nope, rot] = [2, 6, 4];
    const base = { model_type: "deepseek_v3", vocab_size: 29, hidden_size: 16, intermediate_size: 20, moe_intermediate_size: 8, num_hidden_layers: 2, first_k_dense_replace: 1, num_attention_heads: H, num_key_value_heads: H, n_routed_experts: 4, num_experts_per_tok: 2, n_group: 1, topk_group: 1, q_lora_rank: 8, kv_lora_rank: 8, qk_nope_head_dim: nope, qk_rope_head_dim: rot, v_head_dim: 6, max_position_embeddings: 64, initializer_range: 0.3 };
    const yarn = { rope_type: "yarn", factor, original_max_position_embeddings: 16 };
    const got = await logitsOf({ ...base, rope_scaling: { ...yarn, attention_factor: a, mscale: 1, mscale_all_dim: k } });
    const want = await logitsOf({ ...base, rope_scaling: { ...yarn, attention_factor: 1 } }, (n, w, shape) => {
      if (!n.endsWith("q_b_proj.weight")) return;
      const cols = shape[1]!;
      for (let r = 0; r < shape[0]!; r++) {
        const f = r % (nope + rot) < nope ? m * m : a * a * m * m;
        for (let c = 0; c < cols; c++) w[r * cols + c] = w[r * cols + c]! * f;
      }
    });
    expect(maxDiff(got, want)).toBeLessThan(1e-5);
  });
});
