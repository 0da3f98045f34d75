/**
 * The MoE layer's device path (permutation.ts, grouped-linear.ts) on the WebGPU backend (lavapipe
 * here and in CI) against the cpu backend, forward and every gradient, at awkward sizes: one
 * token, every token to one expert, experts with no tokens, dropped pairs, every pair dropped, a
 * token count that is not a multiple of the 64-row tile, hidden 14 and intermediate 7 (not tile multiples) —
 * with the choice given on the host (as the routers read it today) and only on the device
 * (`topkIndices: null`, so nothing is read back to route).
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, WebGpuBackend, createBackend, type Backend } from "@zeromoe/kernels";
import { MixtralForCausalLM } from "../../src/models/mixtral.ts";
import { LocalDispatcher } from "../../src/nn/moe/dispatcher.ts";
import { readGrad } from "../../src/nn/state-dict.ts";
import { backward, fromArray, mul, normalFill, streamKey, sum, uniformFill, Variable } from "../../src/tensor/index.ts";
import { tinyMixtral } from "../tiny-models.ts";

const H = 14;
const I = 7;
const E = 5;

const CASES: { name: string; T: number; k: number; idx: (p: number) => number }[] = [
  { name: "one token, k = 1", T: 1, k: 1, idx: () => 3 },
  { name: "every token to one expert (67 tokens)", T: 67, k: 1, idx: () => 2 },
  { name: "9 tokens × 2 slots on experts 1 and 3 only", T: 9, k: 2, idx: (p) => (p % 2 === 0 ? 3 : 1) },
  { name: "71 tokens × 3 slots with drops", T: 71, k: 3, idx: (p) => [0, 2, 4, -1, 2, 0, -1, 1][(p * 5 + 3) % 8]! },
  { name: "every pair dropped", T: 5, k: 2, idx: () => -1 },
];

function randn(n: number, name: string): Float32Array {
  const a = new Float32Array(n);
  normalFill(a, streamKey(29, name), 0, 1);
  return a;
}

/** Output, dx, dw and every expert gradient of one forward+backward of the local path on `be`. */
async function run(be: Backend, c: (typeof CASES)[number], onDevice: boolean): Promise<{ out: Float32Array; dx: Float32Array; dw: Float32Array; grads: number[] }> {
  const { T, k } = c;
  const cfg = tinyMixtral({ hidden_size: H, intermediate_size: I, num_local_experts: E, num_experts_per_tok: k, num_hidden_layers: 1, num_attention_heads: 1, num_key_value_heads: 1 });
  const m = new MixtralForCausalLM(be, cfg, { seed: 5 });
  const idx = Int32Array.from({ length: T * k }, (_, p) => c.idx(p));
  const wh = new Float32Array(T * k);
  uniformFill(wh, streamKey(30, c.name), 0, 0.1, 1);
  const x = new Variable(be, randn(T * H, `x/${c.name}`), [T, H], { name: "x" });
  const w = new Variable(be, wh, [T * k], { name: "w" });
  const d = await new LocalDispatcher().dispatch({ layer: 0, x: x.tensor, topkIndices: onDevice ? null : idx, expertIndices: onDevice ? fromArray(be, idx, [T * k], "i32") : null, topkWeights: w.tensor, numExperts: E, topK: k });
  const y = await m.moeLayers[0]!.experts.forward(d.rows, d.tokensPerExpert, d.experts, d.offsets);
  const out = await new LocalDispatcher().combine(d, y);
  const outHost = Float32Array.from(await out.toArray());
  const g = fromArray(be, randn(T * H, `g/${c.name}`), [T, H]);
  await backward(sum(mul(out, g)));
  const grads: number[] = [];
  for (let e = 0; e < E; e++) {
    for (const n of ["w1", "w2", "w3"]) {
      const p = m.param(`model.layers.0.block_sparse_moe.experts.${e}.${n}.weight`);
      grads.push(...Array.from((await readGrad(p))?.data ?? new Float32Array(p.numel)));
    }
  }
  const dx = Float32Array.from(await be.read(x.gradView(), T * H));
  const dw = Float32Array.from(await be.read(w.gradView(), T * k));
  return { out: outHost, dx, dw, grads };
}

function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let d = 0;
  let s = 1e-6;
  for (let i = 0; i < a.length; i++) {
    d = Math.max(d, Math.abs(Number(a[i]) - Number(b[i])));
    s = Math.max(s, Math.abs(Number(b[i])));
  }
  return d / s;
}

describe("MoE device path: webgpu = cpu", () => {
  for (const c of CASES) {
    for (const onDevice of [false, true]) {
      test(`${c.name}${onDevice ? ", choice only on the device" : ""}`, async () => {
        const { backend: gpu } = await createBackend("auto", { choose: "first-adapter" });
        const ref = await run(new CpuBackend(), c, onDevice);
        const got = await run(gpu, c, onDevice);
        const tol = gpu.info.name === "cpu" ? 0 : 1e-5;
        expect(relErr(got.out, ref.out)).toBeLessThanOrEqual(tol);
        expect(relErr(got.dx, ref.dx)).toBeLessThanOrEqual(tol * 10);
        expect(relErr(got.dw, ref.dw)).toBeLessThanOrEqual(tol * 10);
        expect(relErr(got.grads, ref.grads)).toBeLessThanOrEqual(tol * 10);
      }, 300_000);
    }
  }

  test("cpu: the choice on the host and on the device give bit-identical results", async () => {
    for (const c of CASES) {
      const a = await run(new CpuBackend(), c, false);
      const b = await run(new CpuBackend(), c, true);
      expect(Array.from(b.out)).toEqual(Array.from(a.out));
      expect(Array.from(b.dx)).toEqual(Array.from(a.dx));
      expect(Array.from(b.dw)).toEqual(Array.from(a.dw));
      expect(b.grads).toEqual(a.grads);
    }
  });

  test("one layer's forward + backward: no host read, and the same dispatches for 4 and 16 experts (no per-expert work)", async () => {
    const { backend: be } = await createBackend("auto", { choose: "first-adapter" });
    if (!(be instanceof WebGpuBackend)) return; // structural counts need the webgpu backend's stats()
    let reads = 0;
    const read = be.read.bind(be);
    be.read = (src, n) => {
      reads++;
      return read(src, n);
    };
    const count = async (E: number): Promise<{ dispatches: number; reads: number }> => {
      const T = 37;
      const cfg = tinyMixtral({ hidden_size: H, intermediate_size: I, num_local_experts: E, num_experts_per_tok: 2, num_hidden_layers: 1, num_attention_heads: 1, num_key_value_heads: 1 });
      const m = new MixtralForCausalLM(be, cfg, { seed: 8 });
      const pass = async () => {
        await be.flush();
        const d0 = be.stats().dispatches;
        const r0 = reads;
        const x = new Variable(be, randn(T * H, `x/${E}`), [T, H], { name: "x" });
        const { output } = await m.moeLayers[0]!.forward(x.tensor);
        await backward(sum(mul(output, fromArray(be, randn(T * H, `g/${E}`), [T, H]))));
        await be.flush();
        return { dispatches: be.stats().dispatches - d0, reads: reads - r0 };
      };
      await pass(); // compile pipelines
      return pass();
    };
    const a = await count(4);
    const b = await count(16);
    expect(a.reads).toBe(0);
    expect(b.reads).toBe(0);
    expect(b.dispatches).toBe(a.dispatches);
  }, 300_000);
});
