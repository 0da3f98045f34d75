/**
 * Whole-model gradients against central finite differences in float64 (cpu backend, precision
 * f64): Llama with tied embeddings and Mixtral (router, experts, aux loss), at awkward sizes.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { LlamaForCausalLM, type CausalDecoder } from "../src/models/llama.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";
import { readGrad } from "../src/nn/state-dict.ts";
import { backward, noGrad } from "../src/tensor/index.ts";
import { tinyLlama, tinyMixtral, tokens } from "./tiny-models.ts";

async function checkModel(model: CausalDecoder, be: CpuBackend, ids: Int32Array, labels: Int32Array, B: number, S: number, perParam: number): Promise<number> {
  const input = { inputIds: ids, labels, batch: B, seq: S };
  const out = await model.forward(input);
  await backward(out.loss!);
  const lossAt = async (): Promise<number> => {
    const o = await noGrad(() => model.forward(input));
    const v = await o.loss!.item();
    o.logits?.dispose();
    o.loss!.dispose();
    return v;
  };
  const eps = 1e-6;
  let worst = 0;
  for (const p of model.parameters()) {
    const g = (await readGrad(p))!.data;
    for (let s = 0; s < perParam; s++) {
      const j = Math.floor(((s + 0.5) / perParam) * p.numel);
      const at = { buf: p.unit.data!, off: p.offset + j };
      const orig = Number((await be.read(at, 1))[0]);
      be.write(at, Float64Array.of(orig + eps));
      const lp = await lossAt();
      be.write(at, Float64Array.of(orig - eps));
      const lm = await lossAt();
      be.write(at, Float64Array.of(orig));
      const num = (lp - lm) / (2 * eps);
      const ana = Number(g[j]);
      const rel = Math.abs(num - ana) / Math.max(1e-4, Math.abs(num), Math.abs(ana));
      if (rel > 1e-5) throw new Error(`${p.name}[${j}]: numeric ${num}, analytic ${ana}`);
      worst = Math.max(worst, rel);
    }
  }
  return worst;
}

describe("model gradients vs central differences (f64)", () => {
  test("llama, tied embeddings, ignored label", async () => {
    const be = new CpuBackend({ precision: "f64" });
    const cfg = tinyLlama({ tie_word_embeddings: true, initializer_range: 0.3, num_hidden_layers: 1 });
    const m = new LlamaForCausalLM(be, cfg, { seed: 11 });
    const B = 2;
    const S = 5;
    const ids = tokens(B * S, cfg.vocab_size, "fd-llama");
    const labels = Int32Array.from(ids);
    labels[3] = -100;
    expect(await checkModel(m, be, ids, labels, B, S, 3)).toBeLessThan(1e-5);
  });

  test("mixtral: router, experts and load-balancing loss", async () => {
    const be = new CpuBackend({ precision: "f64" });
    const cfg = tinyMixtral({ initializer_range: 0.3, router_aux_loss_coef: 0.3 });
    const m = new MixtralForCausalLM(be, cfg, { seed: 12 });
    const B = 1;
    const S = 6;
    const ids = tokens(B * S, cfg.vocab_size, "fd-mix");
    expect(await checkModel(m, be, ids, ids, B, S, 2)).toBeLessThan(1e-5);
  });
});
