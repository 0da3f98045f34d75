import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { generate, pickToken } from "../src/models/generate.ts";
import { LlamaForCausalLM } from "../src/models/llama.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";
import { noGrad } from "../src/tensor/index.ts";
import { tinyLlama, tinyMixtral } from "./tiny-models.ts";

describe("generate", () => {
  test("greedy decoding without the cache = arg-max of the full forward at every step; window of max_position_embeddings", async () => {
    const be = new CpuBackend();
    const cfg = tinyLlama({ initializer_range: 0.5, max_position_embeddings: 6 });
    const m = new LlamaForCausalLM(be, cfg, { seed: 31 });
    const out = await generate(m, [3, 1, 4], { maxNewTokens: 7, cache: false });
    expect(out.length).toBe(10);
    for (let t = 3; t < out.length; t++) {
      const ctx = Array.from(out.slice(Math.max(0, t - 6), t));
      const o = await noGrad(() => m.forward({ inputIds: ctx, batch: 1, seq: ctx.length }));
      const all = await o.logits!.toArray();
      o.logits!.dispose();
      const last = Array.from(all.slice((ctx.length - 1) * cfg.vocab_size, ctx.length * cfg.vocab_size));
      expect(out[t]).toBe(last.indexOf(Math.max(...last)));
    }
    expect(be.memory().current.activation).toBe(0);
  });

  test("sampling is reproducible by seed and respects top-k", async () => {
    const be = new CpuBackend();
    const m = new MixtralForCausalLM(be, tinyMixtral(), { seed: 32 });
    const a = await generate(m, [1, 2], { maxNewTokens: 6, temperature: 1, seed: 5 });
    const b = await generate(m, [1, 2], { maxNewTokens: 6, temperature: 1, seed: 5 });
    const c = await generate(m, [1, 2], { maxNewTokens: 6, temperature: 1, seed: 6 });
    expect(Array.from(b)).toEqual(Array.from(a));
    expect(Array.from(c)).not.toEqual(Array.from(a));
    expect(be.memory().current.activation).toBe(0);
    const logits = [0.1, 3, -1, 2.9, 0];
    for (const u of [0, 0.3, 0.6, 0.99]) expect([1, 3]).toContain(pickToken(logits, 1, 2, u));
    expect(pickToken(logits, 0, 0, 0.5)).toBe(1);
    expect(pickToken([2, 5, 5], 0, 0, 0)).toBe(1);
  });
});
