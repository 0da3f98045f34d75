/**
 * Packed rows (tensor/ops/sequence-segments.ts): a row holding several examples, with per-token
 * segment ids, gives each example the loss and the gradients it has alone in a row — RoPE
 * positions restart and attention stays inside the segment. Checked on a tiny llama (awkward
 * sizes: vocab 37, hidden 18, 3 heads of 6 with 1 kv head); every other op of the families
 * (norms, MLPs, MoE blocks) is per token, only rope and attention see the sequence.
 *
 * For example e of a packed row, the packed forward scores only e's labels (the others −100) and
 * is compared with e alone in a row of its own length: loss within 1e-6 (cpu f32: the per-segment
 * kernels see exactly the example's rows, so the results agree to rounding of the row-independent
 * matmuls; stated 1e-6 as the issue asks) and every parameter gradient within 1e-6 (absolute, on
 * gradients of order 1e-2..1). webgpu (lavapipe or a GPU): the same at 1e-5 (f32 kernels whose
 * reduction order depends on the row count).
 * Without segment ids, the same packed row gives a different loss (the check is discriminative).
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, type Backend } from "@zeromoe/kernels";
import { LlamaForCausalLM } from "../../src/models/llama.ts";
import { readGrad } from "../../src/nn/state-dict.ts";
import { backward } from "../../src/tensor/index.ts";
import { tinyLlama, tokens } from "../tiny-models.ts";

/** Example lengths of the packed row (sum 29, a prime: no tile multiple). */
const LENGTHS = [11, 5, 13];
const S = LENGTHS.reduce((a, b) => a + b, 0);

async function lossAndGrads(model: LlamaForCausalLM, ids: Int32Array, labels: Int32Array, seq: number, segmentIds?: Int32Array): Promise<{ loss: number; grads: Map<string, Float64Array> }> {
  model.zeroGrad();
  const out = await model.forward({ inputIds: ids, labels, batch: 1, seq, ...(segmentIds ? { segmentIds } : {}) });
  const loss = await out.loss!.item();
  await backward(out.loss!);
  const grads = new Map<string, Float64Array>();
  for (const p of model.parameters()) grads.set(p.name, Float64Array.from((await readGrad(p))!.data as ArrayLike<number>));
  return { loss, grads };
}

async function checkPacked(be: Backend, tol: number): Promise<void> {
  const cfg = tinyLlama({ initializer_range: 0.2 });
  const model = new LlamaForCausalLM(be, cfg, { seed: 5 });
  const ids = tokens(S, cfg.vocab_size, "packed-row");
  const segs = new Int32Array(S);
  let at = 0;
  LENGTHS.forEach((n, e) => {
    segs.fill(e * 7 + 3, at, at + n); // any integers; a change of id starts a segment
    at += n;
  });
  at = 0;
  for (let e = 0; e < LENGTHS.length; e++) {
    const n = LENGTHS[e]!;
    // example e alone: its ids, labels = ids except a masked "prompt" (its first 2 tokens)
    const alone = ids.slice(at, at + n);
    const aloneLabels = Int32Array.from(alone);
    aloneLabels.fill(-100, 0, 2);
    const packedLabels = new Int32Array(S).fill(-100);
    packedLabels.set(aloneLabels, at);
    const a = await lossAndGrads(model, alone, aloneLabels, n);
    const p = await lossAndGrads(model, ids, packedLabels, S, segs);
    expect(Math.abs(a.loss - p.loss)).toBeLessThanOrEqual(tol);
    let worst = 0;
    for (const [name, g] of a.grads) {
      const h = p.grads.get(name)!;
      for (let i = 0; i < g.length; i++) worst = Math.max(worst, Math.abs(g[i]! - h[i]!));
    }
    expect(worst).toBeLessThanOrEqual(tol);
    // without the segment ids, examples after the first see their predecessors: another loss
    if (e > 0) {
      const u = await lossAndGrads(model, ids, packedLabels, S);
      expect(Math.abs(u.loss - a.loss)).toBeGreaterThan(1e-4);
    }
    at += n;
  }
}

describe("packed rows equal the examples alone", () => {
  test("cpu: per-example loss and gradients within 1e-6", async () => {
    await checkPacked(new CpuBackend(), 1e-6);
  });

  test("auto-selected backend (webgpu where an adapter exists): within 1e-5", async () => {
    const { backend } = await createBackend("auto", { choose: "first-adapter" });
    console.log(`packed rows on ${backend.info.name}`);
    await checkPacked(backend, backend.info.name === "webgpu" ? 1e-5 : 1e-6);
  }, 300_000);

  test("segment ids with a KV cache or of the wrong length are refused", async () => {
    const be = new CpuBackend();
    const cfg = tinyLlama();
    const model = new LlamaForCausalLM(be, cfg, { seed: 1 });
    const ids = tokens(6, cfg.vocab_size, "bad");
    await expect(model.forward({ inputIds: ids, labels: ids, batch: 1, seq: 6, segmentIds: new Int32Array(5) })).rejects.toThrow("segmentIds has 5 entries, expected batch·seq = 6");
  });
});
