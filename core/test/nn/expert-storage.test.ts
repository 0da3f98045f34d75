/**
 * 16-bit experts without an f32 working copy (nn/unit.ts `workingCopy: false`, read and written by
 * nn/moe/grouped-linear.ts through `Parameter.readView` / `gradSinkView`) against the same experts
 * with the working copy (the path every 16-bit unit took before): output, input gradient and every
 * expert's 16-bit gradient bit for bit, on the cpu backend and on the webgpu one (lavapipe here),
 * bf16 and f16, at awkward sizes (hidden 13, intermediate 7, an expert with no rows, rows not a
 * multiple of any tile), with the row counts on the host and only on the device. And what it is
 * for: no f32 copy and no f32 gradient of the experts is ever allocated, and the step's peak is
 * lower by at least the experts' f32 copy.
 */
import { describe, expect, test } from "bun:test";
import { bf16FromNumber, CpuBackend, createBackend, f16FromNumber, type Backend } from "@zeromoe/kernels";
import { GroupedExperts, type ExpertParams } from "../../src/nn/moe/experts.ts";
import { UnitSet, type Unit } from "../../src/nn/unit.ts";
import { backward, fromArray, mul, normalFill, streamKey, sum, Variable } from "../../src/tensor/index.ts";

const H = 13;
const I = 7;
const E = 4;
const ROWS = [5, 0, 11, 3]; // expert 1 gets no rows

function randn(n: number, name: string): Float32Array {
  const a = new Float32Array(n);
  normalFill(a, streamKey(41, name), 0, 1);
  return a;
}

interface Out {
  y: number[];
  dx: number[];
  grads: number[][];
  peak: number;
  f32UnitBuffers: number;
}

/** One forward + backward of E experts (dtype `dtype`, with or without a working copy) on `be`. */
async function run(be: Backend, dtype: "bf16" | "f16", workingCopy: boolean, hostCounts: boolean): Promise<Out> {
  const set = new UnitSet(be);
  const experts: ExpertParams[] = [];
  const units: Unit[] = [];
  const enc = dtype === "bf16" ? bf16FromNumber : f16FromNumber;
  for (let e = 0; e < E; e++) {
    const u = set.add({
      name: `layers.0.experts.${e}`, kind: "expert", layer: 0, expert: e, dtype, workingCopy,
      params: [
        { name: `e${e}.w1`, shape: [I, H], init: { kind: "normal", std: 0.3 } },
        { name: `e${e}.w2`, shape: [H, I], init: { kind: "normal", std: 0.3 } },
        { name: `e${e}.w3`, shape: [I, H], init: { kind: "normal", std: 0.3 } },
      ],
    });
    be.write({ buf: u.data!, off: 0 }, Uint16Array.from(randn(u.numel, `w${e}`), (v) => enc(v * 0.3)));
    units.push(u);
    experts.push({ unit: u, w1: u.params[0]!, w2: u.params[1]!, w3: u.params[2]! });
  }
  // count the f32 buffers of a whole expert's size allocated from here on (working copies, f32
  // gradient accumulators)
  let f32UnitBuffers = 0;
  const alloc = be.alloc.bind(be);
  be.alloc = (dt, n, tag, c) => {
    if (dt === "f32" && n === units[0]!.numel) f32UnitBuffers++;
    return alloc(dt, n, tag, c);
  };
  be.resetPeak();
  const R = ROWS.reduce((a, b) => a + b, 0);
  const x = new Variable(be, randn(R * H, "x"), [R, H], { name: "x" });
  const offsets = Int32Array.from([0, ...ROWS.map((_, i) => ROWS.slice(0, i + 1).reduce((a, b) => a + b, 0))]);
  const mod = new GroupedExperts(0, experts);
  const all = Array.from({ length: E }, (_, e) => e);
  const y = await mod.forward(x.tensor, hostCounts ? ROWS : null, all, hostCounts ? undefined : fromArray(be, offsets, [E + 1], "i32"));
  const yHost = Array.from(await y.toArray(), Number);
  await backward(sum(mul(y, fromArray(be, randn(R * H, "g"), [R, H]))));
  const grads: number[][] = [];
  for (const u of units) grads.push(Array.from(await be.read({ buf: u.grad!, off: 0 }, u.numel), Number));
  const dx = Array.from(await be.read(x.gradView(), R * H), Number);
  const peak = be.memory().peakTotal;
  if (!workingCopy) for (const u of units) expect(u.work === null && u.workGrad === null).toBe(true);
  be.alloc = alloc;
  x.dispose();
  set.destroy();
  return { y: yHost, dx, grads, peak, f32UnitBuffers };
}

describe("16-bit experts without an f32 working copy", () => {
  for (const dtype of ["bf16", "f16"] as const) {
    for (const hostCounts of [true, false]) {
      test(`${dtype}, row counts ${hostCounts ? "on the host" : "only on the device"}: the working-copy path's bits on cpu and webgpu; no f32 copy allocated`, async () => {
        const { backend: gpu } = await createBackend("auto", { choose: "first-adapter" });
        for (const be of [new CpuBackend(), gpu]) {
          const ref = await run(be, dtype, true, hostCounts);
          const got = await run(be, dtype, false, hostCounts);
          expect(got.y).toEqual(ref.y);
          expect(got.dx).toEqual(ref.dx);
          expect(got.grads).toEqual(ref.grads);
          // an expert without rows gets a zero gradient (host counts: no contribution at all)
          expect(got.grads[1]!.every((v) => v === 0)).toBe(true);
          expect(ref.f32UnitBuffers).toBeGreaterThanOrEqual(2 * E); // a copy and an f32 gradient per expert
          expect(got.f32UnitBuffers).toBe(0);
          // the experts' f32 copies (4 bytes per element) are gone from the peak
          expect(ref.peak - got.peak).toBeGreaterThanOrEqual(4 * E * 3 * H * I);
        }
      }, 300_000);
    }
  }

  test("a parameter of such a unit read as an f32 tensor is an error naming it and what to use", () => {
    const be = new CpuBackend();
    const set = new UnitSet(be);
    const u = set.add({ name: "layers.0.experts.0", kind: "expert", dtype: "bf16", workingCopy: false, params: [{ name: "w", shape: [2, 3], init: { kind: "ones" } }] });
    u.materialize();
    expect(u.work).toBeNull();
    expect(() => u.params[0]!.tensor.view).toThrow(/parameter w of unit layers\.0\.experts\.0 is kept in bf16 without an f32 working copy .*Parameter\.readView/);
    expect(() => u.params[0]!.gradView()).toThrow(/unit layers\.0\.experts\.0 keeps its gradient in bf16 .*gradSinkView/);
    expect(u.params[0]!.readView().buf.dtype).toBe("bf16");
    expect(u.params[0]!.gradSinkView().buf.dtype).toBe("bf16");
    set.destroy();
  });
});
