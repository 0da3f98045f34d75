/**
 * DeepSeek-V3 and DeepSeek-V2 against Hugging Face Transformers 5.17 (core/test/fixtures/deepseek_v3
 * and deepseek_v2, made by scripts/hf-fixtures/make_moe_fixtures.py on the H200): 3 layers, layer 0
 * dense (first_k_dense_replace 1), hidden 32, 4 heads, multi-head latent attention (V3 q_lora_rank
 * 16, V2 a full q_proj; kv_lora_rank 12, qk_nope 8, qk_rope 4, v_head_dim 6 ≠ qk 12), 8 routed
 * experts top-2 in 4 groups (topk_group 2) plus one shared expert; V3: sigmoid scores, random
 * e_score_correction_bias, norm_topk_prob, routed_scaling_factor 2.5, interleaved RoPE; V2:
 * softmax, group_limited_greedy, routed_scaling_factor 1.5. Logits, loss, router logits of each
 * MoE layer within 1e-5 of the tensor's max, every gradient within 1e-4 (observed values printed),
 * in both weight layouts, f32 cpu backend (WebGPU: moe-families-webgpu.test.ts).
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { loadStateDict as readSafetensors } from "../../src/checkpoint/hf-load.ts";
import { countParameters } from "../../src/config/param-count.ts";
import { resolveModelConfig } from "../../src/config/resolve-model.ts";
import { createModel } from "../../src/engine/model-factory.ts";
import { DeepseekV3ForCausalLM } from "../../src/models/deepseek.ts";
import type { StateDict } from "../../src/nn/state-dict.ts";
import { hfParity } from "./hf-moe-parity.ts";

for (const family of ["deepseek_v3", "deepseek_v2"]) {
  const dir = `core/test/fixtures/${family}`;
  describe(`${family} vs Hugging Face`, () => {
    for (const file of ["model.safetensors", "state_dict.safetensors"]) {
      test(`f32 cpu, ${file}`, async () => {
        const r = await hfParity(dir, file, new CpuBackend());
        console.log(`${family} ${file}: logits ${r.logits.toExponential(2)} loss ${r.loss.toExponential(2)} router ${r.router.toExponential(2)} grads ${r.grad.toExponential(2)}`);
        expect(r.config.model_type as string).toBe(family);
        expect(r.moeLayers).toEqual([1, 2]);
        expect(r.logits).toBeLessThan(1e-5);
        expect(r.loss).toBeLessThan(1e-5);
        expect(r.router).toBeLessThan(1e-5);
        // embed, head 2; attention (V3 7: q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b, o; V2 5) + 2 norms per layer;
        // layer 0 dense 3; layers 1, 2: router + 3 shared + 8 experts × 3
        const attn = family === "deepseek_v3" ? 7 : 5;
        expect(r.grads).toBe(3 + 3 * (attn + 2) + 3 + 2 * (1 + 3 + 24));
      });
    }
    test("countParameters equals the built model", async () => {
      const raw = JSON.parse(await Bun.file(`${dir}/config.json`).text());
      for (const over of [{}, { q_lora_rank: family === "deepseek_v3" ? null : 8, n_shared_experts: 2 }]) {
        const cfg = resolveModelConfig({ ...raw, ...over }, "config").config;
        const m = createModel(new CpuBackend(), cfg, {});
        expect(countParameters(cfg).total).toBe(m.numParameters);
        m.destroy();
      }
    });
  });
}

describe("deepseek_v3 e_score_correction_bias", () => {
  test("loaded from the state dict into the routing, and written back by stateDict", async () => {
    const dir = "core/test/fixtures/deepseek_v3";
    const cfg = resolveModelConfig(JSON.parse(await Bun.file(`${dir}/config.json`).text()), "config").config;
    const m = createModel(new CpuBackend(), cfg, {}) as DeepseekV3ForCausalLM;
    const sd = readSafetensors(`${dir}/model.safetensors`) as unknown as StateDict;
    m.loadStateDict(sd);
    const expected = readSafetensors(`${dir}/expected.safetensors`);
    for (const l of [1, 2]) {
      expect(Array.from(m.expertBias(l)!)).toEqual(Array.from(expected.get(`e_score_correction_bias.${l}`)!.data as Float32Array));
      expect(Array.from(m.expertBias(l)!).some((v) => v !== 0)).toBe(true);
    }
    expect(m.expertBias(0)).toBeNull();
    const back = await m.stateDict();
    expect(Array.from(back.get("model.layers.2.mlp.gate.e_score_correction_bias")!.data as Float32Array)).toEqual(Array.from(m.expertBias(2)!));
    m.destroy();
  });
  test("config errors name the key", () => {
    const bad = (over: Record<string, unknown>) => () => resolveModelConfig({ model_type: "deepseek_v3", hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 4, num_hidden_layers: 2, first_k_dense_replace: 1, n_routed_experts: 8, n_group: 4, topk_group: 2, qk_rope_head_dim: 4, ...over }, "model");
    expect(bad({})).not.toThrow();
    expect(bad({ num_key_value_heads: 2 })).toThrow(/num_key_value_heads/);
    expect(bad({ n_group: 3 })).toThrow(/n_group/);
    expect(bad({ topk_group: 5 })).toThrow(/topk_group/);
    expect(bad({ qk_head_dim: 99 })).toThrow(/qk_head_dim/);
    expect(bad({ first_k_dense_replace: 2 })).toThrow(/first_k_dense_replace/);
    expect(bad({ output_router_logits: true })).toThrow(/output_router_logits/);
  });
});
