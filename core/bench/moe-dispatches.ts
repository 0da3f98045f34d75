/**
 * Dispatches and host reads of ONE MoE layer's forward + backward on the WebGPU backend, at
 * mixtral-small's layer shape (hidden 512, intermediate 1024, 8 experts, top-2; core/bench/train.ts)
 * and a small token count — a structural count (not a timing), so it runs on lavapipe.
 *
 *   bun core/bench/moe-dispatches.ts [--tokens 64] [--experts 8] [--topk 2] [--hidden 512] [--intermediate 1024]
 *
 * The layer is the model's own (router = Hugging Face top-k, local dispatcher, grouped experts);
 * x [T, hidden] is random, the loss is Σ out ⊙ g with a random g. One warm-up pass compiles the
 * pipelines; the second pass is counted: dispatches from `WebGpuBackend.stats()`, host reads by
 * counting calls of `Backend.read` (each waits for the device).
 */
import { parseArgs } from "node:util";
import { WebGpuBackend, createGPU } from "@zeromoe/kernels";
import { MixtralForCausalLM, mixtralConfig } from "@zeromoe/core/models";
import { backward, fromArray, mul, normalFill, streamKey, sum, Variable } from "@zeromoe/core/tensor";

const { values } = parseArgs({
  options: {
    tokens: { type: "string", default: "64" },
    experts: { type: "string", default: "8" },
    topk: { type: "string", default: "2" },
    hidden: { type: "string", default: "512" },
    intermediate: { type: "string", default: "1024" },
  },
});
const T = Number(values.tokens);
const E = Number(values.experts);
const k = Number(values.topk);
const H = Number(values.hidden);
const I = Number(values.intermediate);

const be = await WebGpuBackend.create(createGPU());
let reads = 0;
const read = be.read.bind(be);
be.read = (src, n) => {
  reads++;
  return read(src, n);
};
const cfg = mixtralConfig({ vocab_size: 256, hidden_size: H, intermediate_size: I, num_hidden_layers: 1, num_attention_heads: 8, num_key_value_heads: 8, max_position_embeddings: 256, rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: false, num_local_experts: E, num_experts_per_tok: k });
const model = new MixtralForCausalLM(be, cfg, { seed: 3 });
const layer = model.moeLayers[0]!;

function randn(n: number, name: string): Float32Array {
  const a = new Float32Array(n);
  normalFill(a, streamKey(41, name), 0, 1);
  return a;
}

async function pass(): Promise<{ dispatches: number; reads: number }> {
  await be.flush();
  const d0 = be.stats().dispatches;
  const r0 = reads;
  const x = new Variable(be, randn(T * H, "x"), [T, H], { name: "x" });
  const { output } = await layer.forward(x.tensor);
  const g = fromArray(be, randn(T * H, "g"), [T, H]);
  await backward(sum(mul(output, g)));
  await be.flush();
  return { dispatches: be.stats().dispatches - d0, reads: reads - r0 };
}

await pass();
const r = await pass();
console.log(JSON.stringify({ adapter: be.info.adapter, tokens: T, hidden: H, intermediate: I, experts: E, topK: k, ...r }));
be.destroy();
