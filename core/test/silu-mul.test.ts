/**
 * The fused SwiGLU activation siluMul (tensor/ops/silu-mul.ts) against the unfused
 * mul(silu(gate), up) it replaces: on the cpu backend values and gradients are equal bit for bit —
 * for the op between two linears, at awkward sizes, in f32 and f64 precision, and for a whole tiny
 * Llama whose MLP uses it (loss and every parameter gradient) — and on WebGPU within f32 tolerance.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, type Backend } from "@zeromoe/kernels";
import { LlamaForCausalLM } from "../src/models/llama.ts";
import { Variable, backward, fromArray, linear, mul, silu, siluMul, sum, type Tensor } from "../src/tensor/index.ts";
import { randn } from "./gradcheck.ts";
import { tinyLlama, tokens } from "./tiny-models.ts";

type Act = (g: Tensor, u: Tensor) => Tensor;
const FUSED: Act = (g, u) => siluMul(g, u);
const UNFUSED: Act = (g, u) => mul(silu(g), u);

/** y = act(x·Wgᵀ, x·Wuᵀ); loss Σ y ⊙ R; returns y and the gradients of x, Wg, Wu (as f64). */
async function mlpGrads(be: Backend, act: Act, n: number, h: number, f: number): Promise<Float64Array[]> {
  const x = new Variable(be, randn(n * h, "x", 3), [n, h]);
  const wg = new Variable(be, randn(f * h, "wg", 3).map((v) => 0.7 * v), [f, h]);
  const wu = new Variable(be, randn(f * h, "wu", 3).map((v) => 0.7 * v), [f, h]);
  const y = act(linear(x.tensor, wg.tensor), linear(x.tensor, wu.tensor));
  const yv = Float64Array.from(await y.retain().toArray());
  const loss = sum(mul(y, fromArray(be, randn(n * f, "R", 9), [n, f])));
  await backward(loss);
  y.dispose();
  return [yv, ...(await Promise.all([x.grad(), wg.grad(), wu.grad()])).map((a) => Float64Array.from(a as Float64Array))];
}

function sameBits(a: Float64Array, b: Float64Array): boolean {
  return a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
}

describe("siluMul (fused SwiGLU activation)", () => {
  for (const precision of ["f32", "f64"] as const) {
    test(`cpu ${precision}: values and gradients equal mul(silu(gate), up) bit for bit`, async () => {
      const be = new CpuBackend({ precision });
      for (const [n, h, f] of [[1, 1, 1], [7, 13, 19], [33, 5, 61]] as const) {
        const a = await mlpGrads(be, FUSED, n, h, f);
        const b = await mlpGrads(be, UNFUSED, n, h, f);
        for (let k = 0; k < a.length; k++) expect(sameBits(a[k]!, b[k]!)).toBe(true);
        expect(a[1]!.some((v) => v !== 0)).toBe(true); // gradients are not trivially equal (zero)
      }
    });
  }

  test("shape and dtype errors name the operands", () => {
    const be = new CpuBackend({ precision: "f32" });
    expect(() => siluMul(fromArray(be, [1, 2, 3], [3]), fromArray(be, [1, 2], [2]))).toThrow(/gate \[3\] and up \[2\] must have the same shape/);
  });

  test("a tiny Llama with the fused MLP: loss and every parameter gradient equal the unfused MLP's (cpu f32)", async () => {
    const be = new CpuBackend({ precision: "f32" });
    class UnfusedLlama extends LlamaForCausalLM {
      protected override async feedForward(layer: number, x: Tensor): Promise<Tensor> {
        const P = (n: string) => this.units.param(`model.layers.${layer}.mlp.${n}.weight`).tensor;
        return linear(UNFUSED(linear(x, P("gate_proj")), linear(x, P("up_proj"))), P("down_proj"));
      }
    }
    const cfg = tinyLlama({ intermediate_size: 23 });
    const B = 2;
    const S = 11;
    const ids = tokens(B * S, cfg.vocab_size, "silu-mul");
    const run = async (m: LlamaForCausalLM) => {
      const out = await m.forward({ inputIds: ids, labels: ids, batch: B, seq: S });
      const loss = await out.loss!.retain().item();
      await backward(out.loss!);
      const grads: Float64Array[] = [];
      for (const u of m.units.units) grads.push(Float64Array.from((await be.read({ buf: u.grad!, off: 0 }, u.numel)) as Float32Array));
      return { loss, grads };
    };
    const fused = await run(new LlamaForCausalLM(be, cfg, { seed: 5 }));
    const unfused = await run(new UnfusedLlama(be, cfg, { seed: 5 }));
    expect(Object.is(fused.loss, unfused.loss)).toBe(true);
    expect(fused.grads.length).toBe(unfused.grads.length);
    for (let k = 0; k < fused.grads.length; k++) expect(sameBits(fused.grads[k]!, unfused.grads[k]!)).toBe(true);
  });

  test("auto-selected backend (webgpu where an adapter exists): within f32 tolerance of the f64 cpu reference", async () => {
    const { backend: be, reason } = await createBackend("auto", { choose: "first-adapter" });
    console.log(`silu-mul on ${be.info.name}: ${reason}`);
    const cpu = new CpuBackend({ precision: "f64" });
    for (const [n, h, f] of [[7, 13, 19], [65, 17, 131]] as const) {
      const got = await mlpGrads(be, FUSED, n, h, f);
      const want = await mlpGrads(cpu, UNFUSED, n, h, f);
      for (let k = 0; k < got.length; k++) {
        const scale = Math.max(...want[k]!.map(Math.abs));
        const err = Math.max(...got[k]!.map((v, i) => Math.abs(v - want[k]![i]!)));
        expect(err).toBeLessThan(1e-5 * scale + 1e-6);
      }
    }
  }, 300_000);
});
