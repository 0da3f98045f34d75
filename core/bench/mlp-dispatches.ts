/**
 * Dispatches of one llama-small forward + backward on the WebGPU backend with the fused SwiGLU
 * activation (`siluMul`, the model's MLP) and with the unfused `mul(silu(gate), up)` it replaced,
 * counted by `WebGpuBackend.stats().dispatches` on the second pass (the first warms caches).
 *
 *   bun core/bench/mlp-dispatches.ts [--batch 2] [--seq 16]
 *
 * The losses of the two must agree (same parameters, same seed). Throws without a WebGPU adapter.
 */
import { createBackend, type WebGpuBackend } from "@zeromoe/kernels";
import { backward, linear, mul, randint, silu, streamKey, type Tensor } from "../src/tensor/index.ts";
import { llamaConfig } from "../src/models/config.ts";
import { LlamaForCausalLM } from "../src/models/llama.ts";
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

const be = (await createBackend("webgpu")).backend as WebGpuBackend;
const cfg = llamaConfig({ ...BENCH_MODELS["llama-small"]!.model });
const B = arg("batch", "2");
const S = arg("seq", "16");
const ids = randint(B * S, cfg.vocab_size, streamKey(1, "mlp-dispatches"));
for (const [name, Model] of [["fused siluMul", LlamaForCausalLM], ["unfused silu + mul", UnfusedLlama]] as const) {
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
