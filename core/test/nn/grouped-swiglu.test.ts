/**
 * The fused expert SwiGLU (core/src/nn/moe/grouped-swiglu.ts) against the separate ops it replaces
 * — groupedLinear(siluMul(groupedLinear(x, W1), groupedLinear(x, W3)), W2), every activation kept
 * in f32 — on random data at awkward sizes (hidden 13, intermediate 7, an expert with no rows, a
 * row count that is no tile multiple), with the row counts on the host and only on the device, on
 * the cpu backend and on webgpu (lavapipe here):
 * - kept in f32 (fp32 jobs): output and every gradient bit for bit on cpu, within f32 rounding
 *   (1e-6 relative to the largest element) on webgpu;
 * - kept in bf16 / f16 (16-bit jobs, experts stored in that dtype): the output bit for bit (the
 *   forward is f32), the gradients within 2⁻⁶ (bf16) / 2⁻⁹ (f16) of the largest element (observed
 *   6.0e-3 / 5.5e-4: one unit in the last place of the 16-bit gradients, plus) the
 *   rounding of h and u to 8 / 11 significant bits, as a 16-bit autocast backward reads them;
 * - weight-stack runs and elementwise chunks (grouped-weights.ts `groupedMemory`, lowered to one
 *   expert per stack and 5-element chunks) give the unchunked bits on cpu;
 * - nothing outlives the op: a no-grad forward, a backward, or a dropped tape leave no buffer.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { bf16FromNumber, CpuBackend, createBackend, f16FromNumber, type Backend } from "@zeromoe/kernels";
import { groupedLinear } from "../../src/nn/moe/grouped-linear.ts";
import { groupedSwiGLU } from "../../src/nn/moe/grouped-swiglu.ts";
import { groupedMemory } from "../../src/nn/moe/grouped-weights.ts";
import { UnitSet, type Unit } from "../../src/nn/unit.ts";
import { backward, fromArray, mul, noGrad, normalFill, resetTape, siluMul, streamKey, sum, Variable, type Tensor } from "../../src/tensor/index.ts";

const H = 13;
const I = 7;
const E = 4;
const ROWS = [6, 0, 17, 4]; // expert 1 gets no rows; 27 rows
const R = ROWS.reduce((a, b) => a + b, 0);
const OFFSETS = Int32Array.from([0, 6, 6, 23, 27]);

const saved0 = { ...groupedMemory };
afterEach(() => Object.assign(groupedMemory, saved0));

function randn(n: number, name: string, scale = 1): Float32Array {
  const a = new Float32Array(n);
  normalFill(a, streamKey(43, name), 0, scale);
  return a;
}

interface Out {
  y: number[];
  dx: number[];
  grads: number[][];
}

/** Forward + backward of E experts in `dtype` (16-bit: stored so, without a working copy), fused
 * (keeping h, u in `saved`) or as the separate ops. */
async function run(be: Backend, dtype: "f32" | "bf16" | "f16", fused: boolean, hostCounts: boolean): Promise<Out> {
  const set = new UnitSet(be);
  const units: Unit[] = [];
  for (let e = 0; e < E; e++) {
    const u = set.add({
      name: `layers.0.experts.${e}`, kind: "expert", layer: 0, expert: e, dtype, workingCopy: false,
      params: [
        { name: `e${e}.w1`, shape: [I, H], init: { kind: "zeros" } },
        { name: `e${e}.w2`, shape: [H, I], init: { kind: "zeros" } },
        { name: `e${e}.w3`, shape: [I, H], init: { kind: "zeros" } },
      ],
    });
    const w = randn(u.numel, `w${e}`, 0.4);
    if (dtype === "f32") be.write({ buf: u.data!, off: 0 }, w);
    else be.write({ buf: u.data!, off: 0 }, Uint16Array.from(w, dtype === "bf16" ? bf16FromNumber : f16FromNumber));
    units.push(u);
  }
  const p = (i: number) => units.map((u) => u.params[i]!.tensor);
  const x = new Variable(be, randn(R * H, "x"), [R, H], { name: "x" });
  const off = fromArray(be, OFFSETS, [E + 1], "i32");
  const counts = hostCounts ? ROWS : null;
  let y: Tensor;
  if (fused) y = groupedSwiGLU(x.tensor, { w1: p(0), w2: p(1), w3: p(2) }, off, counts, dtype);
  else y = groupedLinear(siluMul(groupedLinear(x.tensor, p(0), off, counts), groupedLinear(x.tensor, p(2), off, counts)), p(1), off, counts);
  const yHost = Array.from(await y.toArray(), Number);
  await backward(sum(mul(y, fromArray(be, randn(R * H, "g"), [R, H]))));
  // an expert without rows (counts on the host) gets no contribution, hence no gradient buffer
  const decode = async (u: Unit): Promise<number[]> => (u.grad ? decodeGrad(u) : new Array<number>(u.numel).fill(0));
  const decodeGrad = (u: Unit) => be.read({ buf: u.grad!, off: 0 }, u.numel).then((a) => (dtype === "f32" ? Array.from(a, Number) : Array.from(new Float32Array(new Uint32Array(Array.from(a as Uint16Array, (b) => (dtype === "bf16" ? b << 16 : f16Bits(b)))).buffer))));
  const grads: number[][] = [];
  for (const u of units) grads.push(await decode(u));
  const dx = Array.from(await be.read(x.gradView(), R * H), Number);
  x.dispose();
  set.destroy();
  return { y: yHost, dx, grads };
}

/** f16 bits → f32 bits (normal and subnormal values, ±0; no inf/NaN in these tests). */
function f16Bits(h: number): number {
  const s = (h & 0x8000) << 16;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) {
    if (m === 0) return s;
    const v = m * 2 ** -24;
    return s | (new Uint32Array(new Float32Array([v]).buffer)[0]! & 0x7fffffff);
  }
  return s | ((e - 15 + 127) << 23) | (m << 13);
}

/** max |a − b| / max |b|. */
function relErr(a: readonly number[], b: readonly number[]): number {
  expect(a.length).toBe(b.length);
  let d = 0;
  let s = 1e-30;
  for (let i = 0; i < a.length; i++) {
    d = Math.max(d, Math.abs(a[i]! - b[i]!));
    s = Math.max(s, Math.abs(b[i]!));
  }
  return d / s;
}

async function backends(): Promise<Backend[]> {
  const { backend } = await createBackend("auto", { choose: "first-adapter" });
  return [new CpuBackend(), backend];
}

describe("grouped expert SwiGLU", () => {
  for (const hostCounts of [true, false]) {
    const how = hostCounts ? "row counts on the host" : "row counts only on the device";
    test(`kept in f32, ${how}: the separate ops' output and gradients (cpu bit for bit, webgpu within f32 rounding)`, async () => {
      for (const be of await backends()) {
        const ref = await run(be, "f32", false, hostCounts);
        const got = await run(be, "f32", true, hostCounts);
        const tol = be.info.name === "cpu" ? 0 : 1e-6;
        expect(relErr(got.y, ref.y)).toBeLessThanOrEqual(tol);
        expect(relErr(got.dx, ref.dx)).toBeLessThanOrEqual(tol);
        for (let e = 0; e < E; e++) expect(relErr(got.grads[e]!, ref.grads[e]!.map((v) => v))).toBeLessThanOrEqual(e === 1 ? 0 : tol);
        expect(got.grads[1]!.every((v) => v === 0)).toBe(true);
      }
    }, 300_000);

    for (const [dtype, tol] of [["bf16", 2 ** -6], ["f16", 2 ** -9]] as const) {
      test(`kept in ${dtype}, ${how}: the forward's bits; gradients within ${tol} of the f32-kept path`, async () => {
        for (const be of await backends()) {
          const ref = await run(be, dtype, false, hostCounts);
          const got = await run(be, dtype, true, hostCounts);
          expect(got.y).toEqual(ref.y);
          const errs = [relErr(got.dx, ref.dx), ...[0, 2, 3].map((e) => relErr(got.grads[e]!, ref.grads[e]!))];
          console.log(`grouped SwiGLU kept in ${dtype} (${be.info.name}, ${how}): max relative error dx ${errs[0]!.toExponential(2)}, dW ${errs.slice(1).map((v) => v.toExponential(2)).join(" ")}`);
          for (const e of errs) expect(e).toBeLessThanOrEqual(tol);
          expect(errs.some((e) => e > 0)).toBe(true); // the 16-bit h, u are really what the backward read
          expect(got.grads[1]!.every((v) => v === 0)).toBe(true);
        }
      }, 300_000);
    }
  }

  test("weight stacks of one expert and 5-element chunks: the unchunked bits (cpu)", async () => {
    const be = new CpuBackend();
    for (const dtype of ["f32", "bf16"] as const) {
      const whole = await run(be, dtype, true, true);
      groupedMemory.stackBytes = 4 * H * I; // one expert's weight per stack
      groupedMemory.chunkElements = 5; // R·I = 189 elements: 38 chunks, the last of 4
      const chunked = await run(be, dtype, true, true);
      const chunkedDev = await run(be, dtype, true, false);
      Object.assign(groupedMemory, saved0);
      expect(chunked).toEqual(whole);
      expect(chunkedDev.y).toEqual(whole.y);
      expect(chunkedDev.dx).toEqual(whole.dx);
    }
  });

  test("nothing outlives the op: no-grad forward, backward, dropped tape", async () => {
    const be = new CpuBackend();
    const set = new UnitSet(be);
    const u = set.add({ name: "layers.0.experts.0", kind: "expert", dtype: "bf16", workingCopy: false, params: [
      { name: "w1", shape: [I, H], init: { kind: "zeros" } }, { name: "w2", shape: [H, I], init: { kind: "zeros" } }, { name: "w3", shape: [I, H], init: { kind: "zeros" } },
    ] });
    be.write({ buf: u.data!, off: 0 }, Uint16Array.from(randn(u.numel, "w"), bf16FromNumber));
    const x = new Variable(be, randn(R * H, "x"), [R, H], { name: "x" });
    const off = fromArray(be, Int32Array.from([0, R]), [2], "i32").retain();
    const w = { w1: [u.params[0]!.tensor], w2: [u.params[1]!.tensor], w3: [u.params[2]!.tensor] };
    const inUse = () => Object.values(be.memory().current).reduce((a, b) => a + (b ?? 0), 0);
    const base = inUse();
    await noGrad(async () => {
      const y = groupedSwiGLU(x.tensor, w, off, [R], "bf16");
      await y.toArray();
    });
    expect(inUse()).toBe(base);
    const grad0 = inUse();
    await backward(sum(groupedSwiGLU(x.tensor, w, off, [R], "bf16")));
    const withGrads = inUse(); // x's and the expert's gradients now exist
    expect(withGrads).toBe(grad0 + 4 * R * H + 2 * u.numel);
    groupedSwiGLU(x.tensor, w, off, [R], "bf16");
    resetTape();
    expect(inUse()).toBe(withGrads);
    off.dispose();
    x.dispose();
    set.destroy();
  });

  test("bad inputs are errors naming the problem", () => {
    const be = new CpuBackend();
    const x = fromArray(be, new Float32Array(6), [2, 3]);
    const w = (r: number, c: number) => fromArray(be, new Float32Array(r * c), [r, c]);
    const off = fromArray(be, Int32Array.from([0, 2]), [2], "i32");
    expect(() => groupedSwiGLU(x, { w1: [w(4, 3)], w2: [w(3, 4)], w3: [] }, off, null, "f32")).toThrow(/1 gate, 1 down and 0 up weights/);
    expect(() => groupedSwiGLU(x, { w1: [w(4, 3)], w2: [w(4, 3)], w3: [w(4, 3)] }, off, null, "f32")).toThrow(/every down weight must be f32 \[3, 4\]/);
    expect(() => groupedSwiGLU(x, { w1: [w(4, 3)], w2: [w(3, 4)], w3: [w(4, 3)] }, off, null, "i32")).toThrow(/saved dtype must be f32, bf16 or f16, got i32/);
    expect(() => groupedSwiGLU(x, { w1: [w(4, 5)], w2: [w(5, 4)], w3: [w(4, 5)] }, off, null, "f32")).toThrow(/x .* has 3 features, the weights expect 5/);
    resetTape();
  });
});
