/**
 * qwen3_moe under expert parallelism and ZeRO: the same global batch at world 1 (stage 0) and at
 * world 2 / 4 with ep_size (= AutoEP autoep_size) 2 and 4 at stages 1, 2, 3 gives the same
 * parameters after 3 AdamW steps (an awkward model: dense layer 1 via mlp_only_layers, head_dim 6,
 * 4 experts top-2, norm_topk_prob true). Tolerance 1e-5 absolute (observed 1.2e-7) (docs/moe.md: ep_size > 1 sums an
 * expert's rows in one matmul instead of per micro-batch, f32 rounding; 1e-5 with accumulation).
 */
import { describe, expect, test } from "bun:test";
import { launch } from "../../src/launch/index.ts";
import { FIXTURE_ENTRY, type TrainOut } from "../../src/testing/train-rank.ts";

const model = {
  model_type: "qwen3_moe", vocab_size: 256, hidden_size: 16, intermediate_size: 7, num_hidden_layers: 3,
  num_attention_heads: 2, num_key_value_heads: 1, head_dim: 6, num_local_experts: 4, num_experts_per_tok: 2,
  moe_intermediate_size: 5, norm_topk_prob: true, mlp_only_layers: [1], output_router_logits: true, router_aux_loss_coef: 0.02,
  max_position_embeddings: 64,
};
const job = (over: Record<string, unknown>) => ({
  model, data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 7 }, seed: 7, backend: "cpu",
  train_micro_batch_size_per_gpu: 2, optimizer: { type: "AdamW", params: { lr: 1e-2, weight_decay: 0.1 } }, ...over,
});

async function params(world: number, over: Record<string, unknown>): Promise<{ params: Map<string, number[]>; losses: number[] }> {
  const outs = (await launch({ worldSize: world, entry: FIXTURE_ENTRY, args: { job: job({ ...over, gradient_accumulation_steps: 4 / world }), steps: 3 } })) as TrainOut[];
  const all = new Map<string, number[]>();
  for (const o of outs) for (const [n, v] of Object.entries(o.params)) all.set(n, v);
  return { params: all, losses: outs[0]!.losses };
}

describe("qwen3_moe: expert parallelism × ZeRO equals world 1", () => {
  test("ep 2 stage 1, ep 4 stage 3, ep 2 stage 2 at world 4", async () => {
    const ref = await params(1, {});
    expect(ref.params.size).toBeGreaterThan(30);
    for (const [world, over] of [
      [2, { expert_parallel: { enabled: true, autoep_size: 2, preset_model: "qwen3_moe" }, zero_optimization: { stage: 1 } }],
      [4, { expert_parallel: { enabled: true, autoep_size: 4 }, zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0 } }],
      [4, { moe: { ep_size: 2 }, zero_optimization: { stage: 2 } }],
    ] as const) {
      const got = await params(world, over);
      expect(got.params.size).toBe(ref.params.size);
      expect(Math.abs(got.losses[0]! - ref.losses[0]!)).toBeLessThan(1e-6);
      let worst = 0;
      for (const [n, v] of ref.params) {
        const w = got.params.get(n)!;
        for (let i = 0; i < v.length; i++) worst = Math.max(worst, Math.abs(v[i]! - w[i]!));
      }
      console.log(`world ${world} ${JSON.stringify(over)}: max |Δparam| ${worst.toExponential(2)}`);
      expect(worst).toBeLessThan(1e-5);
    }
  }, 300_000);
});
