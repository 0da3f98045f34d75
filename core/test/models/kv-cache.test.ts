/**
 * KV cache (core/src/models/kv-cache.ts): logits of the prompt run + one-token steps with the cache
 * equal the uncached forward over the whole sequence (GQA, awkward sizes, random weights), on the
 * cpu backend and on WebGPU (lavapipe here, requested explicitly); generate() with and without the
 * cache picks the same tokens; the RoPE matrix equals the rope kernel at an offset.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, type Backend } from "@zeromoe/kernels";
import { generate } from "../../src/models/generate.ts";
import { KVCache, ropeMatrix } from "../../src/models/kv-cache.ts";
import { LlamaForCausalLM, type CausalDecoder } from "../../src/models/llama.ts";
import { MixtralForCausalLM } from "../../src/models/mixtral.ts";
import { fromArray, noGrad, rope } from "../../src/tensor/index.ts";
import { tinyLlama, tinyMixtral, tokens } from "../tiny-models.ts";

/** Next-token logits rows of the uncached forward over `ids` (row t = after ids[0..t]). */
async function fullLogits(m: CausalDecoder, ids: Int32Array): Promise<Float32Array> {
  return noGrad(async () => {
    const o = await m.forward({ inputIds: ids, batch: 1, seq: ids.length });
    const a = Float32Array.from(await o.logits!.toArray());
    o.logits!.dispose();
    o.auxLoss?.dispose();
    return a;
  });
}

/** Prompt of `p` tokens through the cache, then the rest one at a time; rows as in fullLogits. */
async function cachedLogits(m: CausalDecoder, ids: Int32Array, p: number): Promise<Float32Array> {
  const V = m.config.vocab_size;
  const cache = new KVCache(m.be, m.config);
  const out = new Float32Array(ids.length * V);
  try {
    const step = async (start: number, n: number) =>
      noGrad(async () => {
        const o = await m.forward({ inputIds: Array.from(ids.subarray(start, start + n)), batch: 1, seq: n, cache });
        out.set(Float32Array.from(await o.logits!.toArray()), start * V);
        o.logits!.dispose();
        o.auxLoss?.dispose();
      });
    await step(0, p);
    for (let t = p; t < ids.length; t++) await step(t, 1);
    expect(cache.length).toBe(ids.length);
  } finally {
    cache.destroy();
  }
  return out;
}

function maxRelDiff(a: Float32Array, b: Float32Array): number {
  let scale = 0;
  for (const x of b) scale = Math.max(scale, Math.abs(x));
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i]! - b[i]!));
  return d / Math.max(scale, 1e-30);
}

async function checkModels(be: Backend, tol: number): Promise<void> {
  // llama: 3 query heads over 1 kv head (GQA), head_dim 6; mixtral: 5 experts top-2
  const models: CausalDecoder[] = [
    new LlamaForCausalLM(be, tinyLlama({ initializer_range: 0.4 }), { seed: 41 }),
    new LlamaForCausalLM(be, tinyLlama({ initializer_range: 0.4, num_attention_heads: 3, num_key_value_heads: 3, hidden_size: 18 }), { seed: 43 }),
    new MixtralForCausalLM(be, tinyMixtral({ initializer_range: 0.4 }), { seed: 42 }),
  ];
  for (const m of models) {
    const ids = tokens(23, m.config.vocab_size, `kv-${m.config.model_type}`);
    const want = await fullLogits(m, ids);
    for (const p of [1, 7]) {
      const got = await cachedLogits(m, ids, p);
      const d = maxRelDiff(got, want);
      expect(d).toBeLessThan(tol);
    }
    // the prompt run itself is the training path: identical
    const prompt = await cachedLogits(m, ids.subarray(0, 7), 7);
    expect(Array.from(prompt)).toEqual(Array.from(await fullLogits(m, ids.subarray(0, 7))));
    expect(be.memory().current.activation).toBe(0);
    m.destroy();
  }
}

describe("KV cache", () => {
  test("RoPE as a matrix at position p equals the rope kernel's row p", async () => {
    const be = new CpuBackend();
    const D = 10;
    const S = 13;
    const x = tokens(S * 2 * D, 1000, "rope-x");
    const xs = Float32Array.from(x, (v) => v / 500 - 1);
    const y = await noGrad(async () => Float32Array.from(await rope(fromArray(be, xs, [1, S, 2, D]), 500).toArray()));
    for (const p of [0, 1, 12]) {
      const R = ropeMatrix(p, D, 500);
      for (let h = 0; h < 2; h++) {
        for (let j = 0; j < D; j++) {
          let s = 0;
          for (let i = 0; i < D; i++) s += xs[(p * 2 + h) * D + i]! * R[i * D + j]!;
          expect(Math.abs(s - y[(p * 2 + h) * D + j]!)).toBeLessThan(1e-5);
        }
      }
    }
  });

  test("cpu: cached logits equal the uncached forward (llama GQA and MHA, mixtral)", async () => {
    await checkModels(new CpuBackend(), 1e-5);
  });

  test("webgpu (requested explicitly; lavapipe here): cached logits equal the uncached forward", async () => {
    const { backend } = await createBackend("webgpu");
    try {
      await checkModels(backend, 1e-4);
    } finally {
      (backend as { destroy?: () => void }).destroy?.();
    }
  }, 300_000);

  test("generate: with and without the cache, the same greedy tokens and sampled tokens (top-k, top-p); logits agree", async () => {
    const be = new CpuBackend();
    const m = new MixtralForCausalLM(be, tinyMixtral({ initializer_range: 0.5 }), { seed: 44 });
    for (const o of [{ temperature: 0 }, { temperature: 0.9, topK: 7, topP: 0.8, seed: 3 }]) {
      const rowsA: Float32Array[] = [];
      const rowsB: Float32Array[] = [];
      const a = await generate(m, [1, 2, 3], { maxNewTokens: 17, ...o, onLogits: (_s, r) => rowsA.push(r) });
      const b = await generate(m, [1, 2, 3], { maxNewTokens: 17, ...o, cache: false, onLogits: (_s, r) => rowsB.push(r) });
      expect(Array.from(a)).toEqual(Array.from(b));
      for (let i = 0; i < rowsA.length; i++) expect(maxRelDiff(rowsA[i]!, rowsB[i]!)).toBeLessThan(1e-5);
    }
    expect(be.memory().current.activation).toBe(0);
  });

  test("a full cache restarts from the last half of the context; misuse throws", async () => {
    const be = new CpuBackend();
    const m = new LlamaForCausalLM(be, tinyLlama({ max_position_embeddings: 8 }), { seed: 45 });
    const out = await generate(m, [5, 6, 7], { maxNewTokens: 20 });
    expect(out.length).toBe(23);
    const cache = new KVCache(be, m.config);
    await noGrad(() => m.forward({ inputIds: [1, 2, 3, 4, 5], batch: 1, seq: 5, cache }));
    await expect(noGrad(() => m.forward({ inputIds: [1, 2, 3, 4], batch: 1, seq: 4, cache }))).rejects.toThrow(/5 cached \+ 4 new positions exceed the KV cache capacity 8/);
    await expect(noGrad(() => m.forward({ inputIds: [1, 2], batch: 1, seq: 2, cache }))).rejects.toThrow(/one at a time/);
    await expect(m.forward({ inputIds: [1], batch: 1, seq: 1, cache })).rejects.toThrow(/inference/);
    cache.destroy();
    expect(() => new KVCache(be, m.config, 9)).toThrow(/capacity must be an integer in 1..8/);
    await expect(generate(m, [1], { maxNewTokens: 2, topP: 0 })).rejects.toThrow(/topP must be in/);
  });
});
