/**
 * The Mixtral load-balancing loss with the routers' choice on the device (nn/moe/aux-fractions.ts):
 * on the webgpu backend the forward does no host read (the token fractions are counted in f32 on
 * the device), on the cpu backend the counts are still read (float64 fractions, pinned losses) —
 * and both give the same loss, aux loss and gradients (router and experts) to f32 rounding, with
 * and without activation checkpointing, at awkward sizes (2 × 9 tokens, intermediate 11, 5 experts, top-2).
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, WebGpuBackend, type Backend } from "@zeromoe/kernels";
import { MixtralForCausalLM } from "../../src/models/mixtral.ts";
import { readGrad } from "../../src/nn/state-dict.ts";
import { backward } from "../../src/tensor/index.ts";
import { tinyMixtral, tokens } from "../tiny-models.ts";

const B = 2;
const S = 9;

async function run(be: Backend, ckpt: boolean): Promise<{ loss: number; aux: number; grads: Float32Array; forwardReads: number }> {
  const cfg = tinyMixtral({ hidden_size: 16, intermediate_size: 11 });
  const m = new MixtralForCausalLM(be, cfg, { seed: 11 });
  m.gradientCheckpointing = ckpt;
  const ids = tokens(B * S, cfg.vocab_size, "aux-device");
  const reads0 = be instanceof WebGpuBackend ? be.stats().reads : 0;
  const out = await m.forward({ inputIds: ids, labels: ids, batch: B, seq: S });
  const forwardReads = be instanceof WebGpuBackend ? be.stats().reads - reads0 : -1;
  const aux = await m.lastAuxLoss!.item();
  await backward(out.loss!.retain());
  const loss = await out.loss!.item();
  out.loss!.dispose();
  const parts: number[] = [];
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    for (const name of [`model.layers.${l}.block_sparse_moe.gate.weight`, `model.layers.${l}.block_sparse_moe.experts.3.w1.weight`]) {
      const p = m.param(name);
      parts.push(...Array.from((await readGrad(p))?.data ?? new Float32Array(p.numel)));
    }
  }
  m.destroy();
  return { loss, aux, grads: Float32Array.from(parts), forwardReads };
}

describe("Mixtral load-balancing loss with device routing", () => {
  for (const ckpt of [false, true]) {
    test(`webgpu forward reads nothing back and matches the cpu backend (loss, aux, router and expert gradients)${ckpt ? ", activation checkpointing" : ""}`, async () => {
      const { backend: gpu } = await createBackend("webgpu");
      try {
        const c = await run(new CpuBackend(), ckpt);
        const g = await run(gpu, ckpt);
        expect(g.forwardReads).toBe(0);
        expect(c.aux).toBeGreaterThan(0);
        expect(Math.abs(g.aux - c.aux)).toBeLessThanOrEqual(1e-5 * c.aux);
        expect(Math.abs(g.loss - c.loss)).toBeLessThanOrEqual(1e-5 * c.loss);
        expect(g.grads.length).toBe(c.grads.length);
        let maxRef = 0;
        for (const v of c.grads) maxRef = Math.max(maxRef, Math.abs(v));
        expect(maxRef).toBeGreaterThan(0);
        for (let i = 0; i < c.grads.length; i++) {
          if (!(Math.abs(g.grads[i]! - c.grads[i]!) <= 1e-4 * maxRef)) throw new Error(`gradient ${i}: webgpu ${g.grads[i]}, cpu ${c.grads[i]}`);
        }
      } finally {
        (gpu as WebGpuBackend).destroy();
      }
    });
  }
});
