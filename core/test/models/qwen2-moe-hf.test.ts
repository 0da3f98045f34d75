/**
 * Qwen2-MoE against Hugging Face Transformers 5.17 (core/test/fixtures/qwen2_moe, made by
 * scripts/hf-fixtures/make_moe_fixtures.py on the H200: 2 layers, hidden 32, 4 heads / 2 kv heads,
 * q/k/v biases, 4 experts top-2 of moe_intermediate_size 24, norm_topk_prob false, shared expert of
 * 40 with its sigmoid gate, aux coef 0.02): logits, loss (CE + 0.02·aux), aux loss, router logits
 * of each MoE layer, every gradient — in both weight layouts (save_pretrained's per-expert Hub file
 * and Transformers 5's fused state dict), f32 cpu backend. Tolerances: logits/loss/aux/router
 * logits 1e-5 relative to the tensor's max, gradients 1e-4 (observed values printed).
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { countParameters } from "../../src/config/param-count.ts";
import { resolveModelConfig } from "../../src/config/resolve-model.ts";
import { createModel } from "../../src/engine/model-factory.ts";
import { hfParity } from "./hf-moe-parity.ts";

const dir = "core/test/fixtures/qwen2_moe";

describe("qwen2_moe vs Hugging Face (f32 cpu)", () => {
  for (const file of ["model.safetensors", "state_dict.safetensors"]) {
    test(file, async () => {
      const r = await hfParity(dir, file, new CpuBackend());
      expect(r.config.model_type).toBe("qwen2_moe");
      console.log(`qwen2_moe ${file}: logits ${r.logits.toExponential(2)} loss ${r.loss.toExponential(2)} aux ${r.aux.toExponential(2)} router ${r.router.toExponential(2)} grads ${r.grad.toExponential(2)}`);
      expect(r.moeLayers).toEqual([0, 1]);
      expect(r.logits).toBeLessThan(1e-5);
      expect(r.loss).toBeLessThan(1e-5);
      expect(r.aux).toBeLessThan(1e-5);
      expect(r.router).toBeLessThan(1e-5);
      // embed, head 2; per layer: 4 attn + 3 biases + 2 norms + router + 4 shared + 4 experts × 3
      expect(r.grads).toBe(3 + 2 * (4 + 3 + 2 + 1 + 4 + 12));
    });
  }
});

describe("qwen2_moe config and shape", () => {
  test("config.json resolves (num_experts alias, qkv_bias); countParameters equals the built model, also with a dense layer and no biases", async () => {
    const raw = JSON.parse(await Bun.file(`${dir}/config.json`).text());
    const { config } = resolveModelConfig(raw, "config");
    if (config.model_type !== "qwen2_moe") throw new Error("not qwen2_moe");
    expect(config.num_local_experts).toBe(4);
    expect(config.qkv_bias).toBe(true);
    expect(config.head_dim).toBe(8);
    for (const over of [{}, { mlp_only_layers: [1], qkv_bias: false, intermediate_size: 29 }]) {
      const cfg = resolveModelConfig({ ...raw, ...over }, "config").config;
      const m = createModel(new CpuBackend(), cfg, {});
      expect(countParameters(cfg).total).toBe(m.numParameters);
      m.destroy();
    }
  });
  test("a key of another family is named", () => {
    expect(() => resolveModelConfig({ model_type: "qwen2_moe", q_lora_rank: 4 }, "model")).toThrow(/q_lora_rank|unknown/);
  });
});
