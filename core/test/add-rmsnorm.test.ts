/**
 * The fused residual add + RMSNorm (tensor/ops/add-rmsnorm.ts) against the unfused
 * rmsnorm(add(x, r)) it replaces: on the cpu backend values and gradients are equal bit for bit —
 * with the sum used downstream (the next residual add) or not, in f32 and f64 precision, at awkward
 * sizes, and for whole tiny Llama and Mixtral models (loss and every parameter gradient, with and
 * without activation checkpointing) — and on WebGPU within f32 tolerance of the f64 cpu.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, type Backend } from "@zeromoe/kernels";
import { LlamaForCausalLM, selfAttention, type AttentionParams, type CausalDecoder } from "../src/models/llama.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";
import { Variable, add, addRmsnorm, backward, fromArray, mul, rmsnorm, sum, type Tensor } from "../src/tensor/index.ts";
import { randn } from "./gradcheck.ts";
import { tinyLlama, tinyMixtral, tokens } from "./tiny-models.ts";

type Fn = (x: Tensor, r: Tensor, w: Tensor) => { sum: Tensor; normed: Tensor };
const FUSED: Fn = (x, r, w) => addRmsnorm(x, r, w, 1e-5);
const UNFUSED: Fn = (x, r, w) => {
  const s = add(x, r);
  return { sum: s, normed: rmsnorm(s, w, 1e-5) };
};

/** loss = Σ normed ⊙ R1 (+ Σ sum ⊙ R2 when `useSum`); returns normed, sum and the gradients of x, r, w. */
async function run(be: Backend, f: Fn, rows: number, cols: number, useSum: boolean): Promise<Float64Array[]> {
  const x = new Variable(be, randn(rows * cols, "x", 4), [rows, cols]);
  const r = new Variable(be, randn(rows * cols, "r", 4), [rows, cols]);
  const w = new Variable(be, randn(cols, "w", 4).map((v) => 1 + 0.3 * v), [cols]);
  const { sum: s, normed } = f(x.tensor, r.tensor, w.tensor);
  const vals = [Float64Array.from(await normed.retain().toArray()), Float64Array.from(await s.retain().toArray())];
  let loss = sum(mul(normed, fromArray(be, randn(rows * cols, "R1", 8), [rows, cols])));
  if (useSum) loss = add(loss, sum(mul(s, fromArray(be, randn(rows * cols, "R2", 8), [rows, cols]))));
  await backward(loss);
  normed.dispose();
  s.dispose();
  const grads = await Promise.all([x.grad(), r.grad(), w.grad()]);
  return [...vals, ...grads.map((g) => Float64Array.from(g as Float64Array))];
}

function sameBits(a: Float64Array, b: Float64Array): boolean {
  return a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
}

/** What a subclass sees of CausalDecoder's protected members. */
interface DecoderInternals {
  config: CausalDecoder["config"];
  layerParams: { attn: AttentionParams | null; inputNorm: { tensor: Tensor }; postNorm: { tensor: Tensor } }[];
  feedForward(i: number, x: Tensor): Promise<Tensor>;
  kvOf(i: number): undefined;
}

type DecoderClass = new (be: Backend, cfg: never, opts: { seed: number }) => CausalDecoder;

/** The same model with the layer written as before the fusion: h2 = add(h, a); rmsnorm(h2). */
function unfusedLayer(Base: DecoderClass): DecoderClass {
  return class extends (Base as unknown as typeof LlamaForCausalLM) {
    protected override async decoderLayer(i: number, h: Tensor, B: number, S: number): Promise<Tensor> {
      const self = this as unknown as DecoderInternals;
      const c = self.config;
      const p = self.layerParams[i]!;
      const a = selfAttention(rmsnorm(h, p.inputNorm.tensor, c.rms_norm_eps), p.attn!, c, B, S, self.kvOf(i));
      const h2 = add(h, a);
      const m = await self.feedForward(i, rmsnorm(h2, p.postNorm.tensor, c.rms_norm_eps));
      return add(h2, m);
    }
  };
}

describe("addRmsnorm (fused residual add + RMSNorm)", () => {
  for (const precision of ["f32", "f64"] as const) {
    test(`cpu ${precision}: outputs and gradients equal rmsnorm(add(x, r)) bit for bit, sum used downstream or not`, async () => {
      const be = new CpuBackend({ precision });
      for (const [rows, cols] of [[1, 1], [7, 13], [5, 257]] as const) {
        for (const useSum of [true, false]) {
          const a = await run(be, FUSED, rows, cols, useSum);
          const b = await run(be, UNFUSED, rows, cols, useSum);
          for (let k = 0; k < a.length; k++) expect(sameBits(a[k]!, b[k]!)).toBe(true);
          expect(a[2]!.some((v) => v !== 0)).toBe(true);
        }
      }
    });
  }

  test("shape errors name the operands", () => {
    const be = new CpuBackend({ precision: "f32" });
    const x = fromArray(be, [1, 2, 3, 4, 5, 6], [2, 3]);
    expect(() => addRmsnorm(x, fromArray(be, [1, 2, 3], [1, 3]), fromArray(be, [1, 1, 1], [3]), 1e-5)).toThrow(/x \[2, ?3\] and r \[1, ?3\] must have the same shape/);
    expect(() => addRmsnorm(x, x, fromArray(be, [1, 1], [2]), 1e-5)).toThrow(/must have shape \[3\]/);
  });

  for (const [name, Model, cfg] of [["Llama", LlamaForCausalLM, tinyLlama({ intermediate_size: 23 })], ["Mixtral", MixtralForCausalLM, tinyMixtral()]] as const) {
    test(`a tiny ${name}: loss and every parameter gradient equal the unfused layer's, with and without activation checkpointing (cpu f32)`, async () => {
      const be = new CpuBackend({ precision: "f32" });
      const B = 2;
      const S = 9;
      const ids = tokens(B * S, cfg.vocab_size, "add-rmsnorm");
      const go = async (m: CausalDecoder, ckpt: boolean) => {
        m.gradientCheckpointing = ckpt;
        const out = await m.forward({ inputIds: ids, labels: ids, batch: B, seq: S });
        const loss = await out.loss!.retain().item();
        await backward(out.loss!);
        const grads: Float64Array[] = [];
        for (const u of m.units.units) grads.push(Float64Array.from((await be.read({ buf: u.grad!, off: 0 }, u.numel)) as Float32Array));
        m.destroy();
        return { loss, grads };
      };
      const Fused = Model as unknown as DecoderClass;
      const Unfused = unfusedLayer(Fused);
      for (const ckpt of [false, true]) {
        const fused = await go(new Fused(be, cfg as never, { seed: 6 }), ckpt);
        const unfused = await go(new Unfused(be, cfg as never, { seed: 6 }), ckpt);
        expect(Object.is(fused.loss, unfused.loss)).toBe(true);
        for (let k = 0; k < fused.grads.length; k++) expect(sameBits(fused.grads[k]!, unfused.grads[k]!)).toBe(true);
      }
    });
  }

  test("auto-selected backend (webgpu where an adapter exists): within f32 tolerance of the f64 cpu reference", async () => {
    const { backend: be, reason } = await createBackend("auto", { choose: "first-adapter" });
    console.log(`add-rmsnorm on ${be.info.name}: ${reason}`);
    const cpu = new CpuBackend({ precision: "f64" });
    for (const [rows, cols] of [[7, 13], [33, 515]] as const) {
      const got = await run(be, FUSED, rows, cols, true);
      const want = await run(cpu, UNFUSED, rows, cols, true);
      for (let k = 0; k < got.length; k++) {
        const scale = Math.max(...want[k]!.map(Math.abs));
        const err = Math.max(...got[k]!.map((v, i) => Math.abs(v - want[k]![i]!)));
        expect(err).toBeLessThan(2e-5 * scale + 1e-6);
      }
    }
  }, 300_000);
});
