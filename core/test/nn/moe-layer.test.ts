/**
 * The MoE layer's pieces (core/src/nn/moe/): the permutation plan, the local dispatcher's
 * permutation skeleton and the grouped experts, at awkward sizes — one token, every token to one
 * expert, experts with no tokens, dropped pairs, every pair dropped — against independent
 * references:
 * - permutePlan against a sort of the kept pairs by (expert, pair);
 * - forward against a float64 host computation of out[t] = Σ_s w[t,s] · w2(silu(w1 x_t) ⊙ w3 x_t);
 * - gradients (x, combine weights, every expert parameter) against a per-pair autograd path that
 *   has no permutation, grouping or slicing (each kept pair is its own one-row expert call);
 * - the grouped experts enter exactly the listed experts, ascending, also those without rows.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, type Backend } from "@zeromoe/kernels";
import { MixtralForCausalLM } from "../../src/models/mixtral.ts";
import { LocalDispatcher, permutePlan } from "../../src/nn/moe/dispatcher.ts";
import { readGrad, readParam } from "../../src/nn/state-dict.ts";
import type { UnitHooks } from "../../src/nn/unit.ts";
import { add, backward, fromArray, gatherRows, noGrad, linear, mul, normalFill, reshape, scatterAddRows, silu, streamKey, sum, uniformFill, Variable, type Tensor } from "../../src/tensor/index.ts";
import { tinyMixtral } from "../tiny-models.ts";

const H = 6;
const I = 5;
const E = 5;

function model(be: Backend, k: number): MixtralForCausalLM {
  const cfg = tinyMixtral({ hidden_size: H, intermediate_size: I, num_local_experts: E, num_experts_per_tok: k, num_hidden_layers: 1, num_attention_heads: 3, num_key_value_heads: 1 });
  return new MixtralForCausalLM(be, cfg, { seed: 11 });
}

function randn(n: number, name: string): Float32Array {
  const a = new Float32Array(n);
  normalFill(a, streamKey(17, name), 0, 1);
  return a;
}

/** Routing cases: T tokens, k slots, expert of each pair (−1 = dropped). */
const CASES: { name: string; T: number; k: number; idx: (p: number) => number }[] = [
  { name: "one token, k = 1", T: 1, k: 1, idx: () => 3 },
  { name: "one token, k = 2, second slot dropped", T: 1, k: 2, idx: (p) => (p === 0 ? 4 : -1) },
  { name: "every token to one expert (13 tokens)", T: 13, k: 1, idx: () => 2 },
  { name: "7 tokens × 2 slots on experts 1 and 3 only (0, 2, 4 empty)", T: 7, k: 2, idx: (p) => (p % 2 === 0 ? 3 : 1) },
  { name: "11 tokens × 3 slots, random over {0, 2, 4} with drops", T: 11, k: 3, idx: (p) => [0, 2, 4, -1, 2, 0, -1][(p * 5 + 3) % 7]! },
  { name: "every pair dropped", T: 5, k: 2, idx: () => -1 },
];

function indicesOf(c: (typeof CASES)[number]): Int32Array {
  return Int32Array.from({ length: c.T * c.k }, (_, p) => c.idx(p));
}

describe("permutePlan", () => {
  for (const c of CASES) {
    test(c.name, () => {
      const idx = indicesOf(c);
      const plan = permutePlan(idx, E, c.k);
      const kept = [...idx.keys()].filter((p) => idx[p] !== -1).sort((a, b) => idx[a]! - idx[b]! || a - b);
      expect(Array.from(plan.pairOf)).toEqual(kept);
      expect(Array.from(plan.tokenOf)).toEqual(kept.map((p) => Math.floor(p / c.k)));
      for (let e = 0; e < E; e++) {
        expect(plan.counts[e]).toBe(kept.filter((p) => idx[p] === e).length);
        expect(plan.starts[e]).toBe(kept.filter((p) => idx[p]! < e).length);
      }
    });
  }
  test("an expert index outside [−1, E) is an error naming it", () => {
    expect(() => permutePlan(Int32Array.from([0, 5]), E, 1)).toThrow(/expert index 5 at pair 1/);
    expect(() => permutePlan(Int32Array.from([-2]), E, 1)).toThrow(/expert index -2/);
  });
});

/** Float64 host reference of the layer output. */
async function hostOutput(m: MixtralForCausalLM, x: Float32Array, w: Float32Array, idx: Int32Array, T: number, k: number): Promise<Float64Array> {
  const out = new Float64Array(T * H);
  const P = async (e: number, n: string) => (await readParam(m.param(`model.layers.0.block_sparse_moe.experts.${e}.${n}.weight`))).data as Float32Array;
  for (let p = 0; p < T * k; p++) {
    const e = idx[p]!;
    if (e === -1) continue;
    const t = Math.floor(p / k);
    const [w1, w2, w3] = [await P(e, "w1"), await P(e, "w2"), await P(e, "w3")];
    const hmid = new Float64Array(I);
    for (let i = 0; i < I; i++) {
      let a = 0;
      let b = 0;
      for (let j = 0; j < H; j++) {
        a += w1[i * H + j]! * x[t * H + j]!;
        b += w3[i * H + j]! * x[t * H + j]!;
      }
      hmid[i] = (a / (1 + Math.exp(-a))) * b;
    }
    for (let j = 0; j < H; j++) {
      let y = 0;
      for (let i = 0; i < I; i++) y += w2[j * I + i]! * hmid[i]!;
      out[t * H + j]! += w[p]! * y;
    }
  }
  return out;
}

/** Per-pair reference path: every kept pair is its own one-row expert call, added into out. */
function perPairOutput(m: MixtralForCausalLM, x: Tensor, w: Tensor, idx: Int32Array, T: number, k: number): Tensor | null {
  const be = x.be;
  let out: Tensor | null = null;
  for (let p = 0; p < T * k; p++) {
    const e = idx[p]!;
    if (e === -1) continue;
    const t = Math.floor(p / k);
    const P = (n: string) => m.param(`model.layers.0.block_sparse_moe.experts.${e}.${n}.weight`).tensor;
    const row = gatherRows(x, fromArray(be, [t], [1], "i32"));
    const y = linear(mul(silu(linear(row, P("w1"))), linear(row, P("w3"))), P("w2"));
    const wp = gatherRows(reshape(w, [T * k, 1]), fromArray(be, [p], [1], "i32"));
    const c = scatterAddRows(y, fromArray(be, [t], [1], "i32"), wp, T);
    out = out ? add(out, c) : c;
  }
  return out;
}

async function expertGrads(m: MixtralForCausalLM): Promise<number[]> {
  const g: number[] = [];
  for (let e = 0; e < E; e++) {
    for (const n of ["w1", "w2", "w3"]) {
      const p = m.param(`model.layers.0.block_sparse_moe.experts.${e}.${n}.weight`);
      // an expert never entered has no gradient buffer: its gradient is zero
      g.push(...Array.from((await readGrad(p))?.data ?? new Float32Array(p.numel)));
    }
  }
  return g;
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(Number(a[i]) - Number(b[i])));
  return d;
}

describe("local dispatcher + grouped experts", () => {
  for (const c of CASES) {
    test(`${c.name}: output = float64 reference; gradients = per-pair path`, async () => {
      const { T, k } = c;
      const idx = indicesOf(c);
      const xh = randn(T * H, `x/${c.name}`);
      const wh = new Float32Array(T * k);
      uniformFill(wh, streamKey(18, `w/${c.name}`), 0, 0.1, 1);
      const gh = randn(T * H, `g/${c.name}`);
      // the skeleton
      const be = new CpuBackend();
      const m = model(be, k);
      const x = new Variable(be, xh, [T, H], { name: "x" });
      const w = new Variable(be, wh, [T * k], { name: "w" });
      const layer = m.moeLayers[0]!;
      const dispatcher = new LocalDispatcher();
      const d = await dispatcher.dispatch({ layer: 0, x: x.tensor, topkIndices: idx, topkWeights: w.tensor, numExperts: E, topK: k });
      expect(d.experts).toEqual([0, 1, 2, 3, 4]);
      expect(Array.from(d.tokensPerExpert!)).toEqual(Array.from(permutePlan(idx, E, k).counts));
      const y = await layer.experts.forward(d.rows, d.tokensPerExpert, d.experts);
      const out = await dispatcher.combine(d, y);
      expect(out.shape).toEqual([T, H]);
      const outHost = Float64Array.from(await out.toArray());
      const ref = await hostOutput(m, xh, wh, idx, T, k);
      const scaleRef = Math.max(1e-3, ...Array.from(ref, Math.abs));
      expect(maxAbsDiff(outHost, ref) / scaleRef).toBeLessThan(1e-5);
      await backward(sum(mul(out, fromArray(be, gh, [T, H]))));
      const got = { x: Array.from(await x.grad()), w: Array.from(await w.grad()), experts: await expertGrads(m) };
      // the per-pair reference on a second model with the same parameters
      const be2 = new CpuBackend();
      const m2 = model(be2, k);
      const x2 = new Variable(be2, xh, [T, H], { name: "x" });
      const w2 = new Variable(be2, wh, [T * k], { name: "w" });
      const out2 = perPairOutput(m2, x2.tensor, w2.tensor, idx, T, k);
      if (out2) await backward(sum(mul(out2, fromArray(be2, gh, [T, H]))));
      const want = { x: Array.from(await x2.grad()), w: Array.from(await w2.grad()), experts: await expertGrads(m2) };
      for (const key of ["x", "w", "experts"] as const) {
        const s = Math.max(1e-3, ...want[key].map(Math.abs));
        expect(maxAbsDiff(got[key], want[key]) / s).toBeLessThan(1e-5);
      }
      if (!out2) {
        // every pair dropped: zero output, zero gradients
        expect(outHost.every((v) => v === 0)).toBe(true);
        expect([...got.x, ...got.w, ...got.experts].every((v) => v === 0)).toBe(true);
      }
    });
  }
});

describe("grouped experts", () => {
  function recorder(events: string[]): UnitHooks {
    return {
      gather: (u, ph) => void events.push(`gather ${u.name} ${ph}`),
      release: (u, ph) => void events.push(`release ${u.name} ${ph}`),
      gradReady: (u) => void events.push(`gradReady ${u.name}`),
    };
  }

  test("a subset of experts (as an expert-parallel rank holds): only those are entered, ascending, also without rows", async () => {
    const be = new CpuBackend();
    const m = model(be, 1);
    const events: string[] = [];
    m.units.hooks = recorder(events);
    const rows = new Variable(be, randn(4 * H, "subset"), [4, H], { name: "rows" });
    const layer = m.moeLayers[0]!;
    // reference (no tape): the four rows through the local path, all routed to expert 3
    const yRef = await noGrad(async () => {
      const d = await new LocalDispatcher().dispatch({ layer: 0, x: rows.tensor, topkIndices: Int32Array.from([3, 3, 3, 3]), topkWeights: fromArray(be, [1, 1, 1, 1], [4]), numExperts: E, topK: 1 });
      return Array.from(await (await layer.experts.forward(d.rows, d.tokensPerExpert, d.experts)).toArray());
    });
    events.length = 0;
    const y = await layer.experts.forward(rows.tensor, [0, 4], [1, 3]);
    // every listed expert is resident during the grouped products: all gathered (ascending), then all released
    expect(events).toEqual(["gather layers.0.experts.1 fwd", "gather layers.0.experts.3 fwd", "release layers.0.experts.1 fwd", "release layers.0.experts.3 fwd"]);
    expect(Array.from(await y.toArray())).toEqual(yRef);
    events.length = 0;
    await backward(sum(y));
    // backward: both gathered before the grouped backward (reverse order), then completed in reverse order
    expect(events).toEqual(["gather layers.0.experts.3 bwd", "gather layers.0.experts.1 bwd", "gradReady layers.0.experts.3", "release layers.0.experts.3 bwd", "gradReady layers.0.experts.1", "release layers.0.experts.1 bwd"]);
  });

  test("no rows at all: every listed expert is still entered; the output is [0, hidden]", async () => {
    const be = new CpuBackend();
    const m = model(be, 1);
    const events: string[] = [];
    m.units.hooks = recorder(events);
    const y = await m.moeLayers[0]!.experts.forward(fromArray(be, [], [0, H]), [0, 0, 0], [0, 2, 4]);
    expect(y.shape).toEqual([0, H]);
    expect(events.filter((e) => e.startsWith("gather"))).toEqual([0, 2, 4].map((e) => `gather layers.0.experts.${e} fwd`));
  });

  test("bad inputs are errors naming the problem", async () => {
    const be = new CpuBackend();
    const experts = model(be, 1).moeLayers[0]!.experts;
    const rows = fromArray(be, randn(3 * H, "bad"), [3, H]);
    await expect(experts.forward(rows, [1, 2], [2, 1])).rejects.toThrow(/strictly ascending/);
    await expect(experts.forward(rows, [1, 1], [0, 1])).rejects.toThrow(/sum to 2, rows has 3/);
    await expect(experts.forward(rows, [3], [0, 1])).rejects.toThrow(/2 experts, 1 row counts/);
    await expect(experts.forward(rows, [3], [E])).rejects.toThrow(/within \[0, 5\)/);
  });
});
