/**
 * Qwen3-MoE against Hugging Face Transformers 5.17 (core/test/fixtures/qwen3_moe, made by
 * scripts/hf-fixtures/make_moe_fixtures.py on the H200: 3 layers, layer 1 dense via mlp_only_layers,
 * head_dim 12 ≠ hidden/heads, 6 experts top-2, norm_topk_prob true, aux coef 0.02): logits, loss
 * (CE + 0.02·aux), aux loss, router logits of each MoE layer, every gradient — in both weight
 * layouts (save_pretrained's per-expert Hub file and Transformers 5's fused state dict), f32 cpu
 * backend. Tolerances: logits/loss/aux/router logits 1e-5 relative to the tensor's max, gradients
 * 1e-4 (observed below 1e-6).
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { hfParity } from "./hf-moe-parity.ts";

const dir = "core/test/fixtures/qwen3_moe";

describe("qwen3_moe vs Hugging Face (f32 cpu)", () => {
  for (const [layout, file] of [["Hub layout (save_pretrained's model.safetensors)", "model.safetensors"], ["Transformers 5 fused layout (state_dict.safetensors)", "state_dict.safetensors"]] as const) {
    test(layout, async () => {
      const r = await hfParity(dir, file, new CpuBackend());
      if (r.config.model_type !== "qwen3_moe") throw new Error(`not qwen3_moe: ${r.config.model_type}`);
      expect(r.config.num_local_experts).toBe(6);
      expect(r.config.head_dim).toBe(12);
      console.log(`qwen3_moe ${file}: worst gradient relative error ${r.grad.toExponential(2)}`);
      expect(r.moeLayers).toEqual([0, 2]);
      expect(r.logits).toBeLessThan(1e-5);
      expect(r.loss).toBeLessThan(1e-5);
      expect(r.aux).toBeLessThan(1e-5);
      expect(r.router).toBeLessThan(1e-5); // ours and the fixture's hf_router_logits
      expect(r.grads).toBe(68); // embed 1, head 2, 3 layers × 8, routers 2, dense MLP 3, 2 × 6 experts × 3
    });
  }
});
