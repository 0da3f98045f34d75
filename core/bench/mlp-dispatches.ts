/**
 * Dispatches of one llama-small forward + backward on the WebGPU backend with the model's fusions
 * (`siluMul`: SwiGLU's activation; `addRmsnorm`: each layer's residual add + post-attention norm),
 * with only the SwiGLU fusion undone (`mul(silu(gate), up)`), and with both undone (also
 * `rmsnorm(add(h, a))`), counted by `WebGpuBackend.stats().dispatches` on the second pass (the
 * first warms caches).
 *
 *   bun core/bench/mlp-dispatches.ts [--batch 2] [--seq 16]
 *
 * The losses of the two must agree (same parameters, same seed). Throws without a WebGPU adapter.
 */
import { createBackend, type WebGpuBackend } from "@zeromoe/kernels";
import { add, backward, linear, mul, randint, rmsnorm, silu, streamKey, type Tensor } from "../src/tensor/index.ts";
import { llamaConfig } from "../src/models/config.ts";
import { LlamaForCausalLM, selfAttention, type AttentionParams } from "../src/models/llama.ts";
import { BENCH_MODELS } from "./train.ts";

function arg(name: string, def: string): number {
  const i = process.argv.indexOf(`--${name}`);
  return Number(i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def);
}

/** llama-small with the MLP written as before the fusion. */
class UnfusedLlama extends LlamaForCausalLM {
  protected override async feedForward(layer: number, x: Tensor): Promise<Tensor> {
    const P = (n: string) => this.units.param(`model.layers.${layer}.mlp.${n}.weight`).tensor;
    return linear(mul(silu(linear(x, P("gate_proj"))), linear(x, P("up_proj"))), P("down_proj"));
  }
}

/** ... and the layer's residual add and post-attention norm as two ops. */
class UnfusedLayerLlama extends UnfusedLlama {
  protected override async decoderLayer(i: number, h: Tensor, B: number, S: number): Promise<Tensor> {
    const c = this.config;
    const p = this.layerParams[i]! as { attn: AttentionParams; inputNorm: { tensor: Tensor }; postNorm: { tensor: Tensor } };
    const a = selfAttention(rmsnorm(h, p.inputNorm.tensor, c.rms_norm_eps), p.attn, c, B, S);
    const h2 = add(h, a);
    const m = await this.feedForward(i, rmsnorm(h2, p.postNorm.tensor, c.rms_norm_eps));
    return add(h2, m);
  }
}

const be = (await createBackend("webgpu")).backend as WebGpuBackend;
const cfg = llamaConfig({ ...BENCH_MODELS["llama-small"]!.model });
const B = arg("batch", "2");
const S = arg("seq", "16");
const ids = randint(B * S, cfg.vocab_size, streamKey(1, "mlp-dispatches"));
for (const [name, Model] of [["fused (siluMul, addRmsnorm)", LlamaForCausalLM], ["silu + mul, addRmsnorm", UnfusedLlama], ["silu + mul, add + rmsnorm", UnfusedLayerLlama]] as const) {
  const model = new Model(be, cfg, { seed: 1 });
  for (let pass = 0; pass < 2; pass++) {
    await be.flush();
    const d0 = be.stats().dispatches;
    const out = await model.forward({ inputIds: ids, labels: ids, batch: B, seq: S });
    await backward(out.loss!.retain());
    const loss = await out.loss!.item();
    out.loss!.dispose();
    await be.flush();
    if (pass === 1) console.log(`${name}: ${be.stats().dispatches - d0} dispatches per forward+backward (llama-small, ${B} × ${S} tokens on ${be.info.adapter}), loss ${loss}`);
  }
  model.destroy();
}
