/**
 * WebGpuBackend infrastructure on the ffi binding (lavapipe in CI), against the CpuBackend or
 * closed-form expectations: 2-D grids past 65535 workgroups, views of one buffer bound together
 * (merged bindings), command batching (automatic submits, host writes ordered after recorded work,
 * freeing buffers that pending work still uses), bit-identical reruns of the deterministic
 * reductions, and 16-bit writes at odd offsets.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Backend, View } from "../../src/backend.ts";
import { CpuBackend } from "../../src/cpu/index.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { grid2d } from "../../src/webgpu/grid.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { randomF32 as rand } from "../../src/testing.ts";
import { offersTimestamps } from "./offers-timestamps.ts";

function close(got: ArrayLike<number>, want: ArrayLike<number>, rtol: number, atol: number): string {
  if (got.length !== want.length) return `length ${got.length} vs ${want.length}`;
  for (let i = 0; i < want.length; i++) {
    if (!(Math.abs(got[i]! - want[i]!) <= atol + rtol * Math.abs(want[i]!))) return `[${i}] got ${got[i]} want ${want[i]}`;
  }
  return "ok";
}

let gpu: WebGpuBackend;
let small: WebGpuBackend; // maxBatch 3: forces many automatic submits
const cpu = new CpuBackend();

beforeAll(async () => {
  const g = createGPU();
  gpu = await WebGpuBackend.create(g);
  small = await WebGpuBackend.create(g, { maxBatch: 3 });
});
afterAll(() => {
  gpu.destroy();
  small.destroy();
});

const at = (be: Backend, data: Float32Array, off = 0, extra = 0): View => {
  const b = be.alloc("f32", data.length + off + extra, "other");
  be.write({ buf: b, off }, data);
  return { buf: b, off };
};

describe("grid2d", () => {
  test("covers the count with both dimensions ≤ the limit", () => {
    for (const n of [0, 1, 7, 65535, 65536, 65537, 131071, 1 << 20, 65535 * 65535]) {
      const [x, y, z] = grid2d(n, 65535);
      expect(z).toBe(1);
      expect(x).toBeLessThanOrEqual(65535);
      expect(y).toBeLessThanOrEqual(65535);
      expect(x * y).toBeGreaterThanOrEqual(n);
      if (n > 0) expect(x * (y - 1)).toBeLessThan(n); // no wholly idle row of workgroups
    }
    expect(() => grid2d(65535 * 65535 + 1, 65535)).toThrow(/65535/);
    expect(() => grid2d(-1, 65535)).toThrow(/non-negative/);
  });
});

describe("dispatch", () => {
  test("softmax over 70001 rows (one workgroup per row: a 2-D grid) matches the cpu backend", async () => {
    const rows = 70001;
    const cols = 3;
    const x = rand(rows * cols, 11);
    const res: Float32Array[] = [];
    for (const be of [gpu, cpu] as Backend[]) {
      const xv = at(be, x, 2);
      const y = be.alloc("f32", rows * cols, "other");
      be.softmax(xv, { buf: y, off: 0 }, rows, cols, false);
      res.push((await be.read({ buf: y, off: 0 }, rows * cols)) as Float32Array);
      be.free(xv.buf);
      be.free(y);
    }
    expect(close(res[0]!, res[1]!, 1e-5, 1e-7)).toBe("ok");
  });

  test("wide rows (256-invocation workgroups, online max/sum): softmax, log-softmax, crossEntropy match the cpu backend", async () => {
    const rows = 3;
    const cols = 5003;
    const x = rand(rows * cols, 21).map((v) => v * 30);
    const tg = Int32Array.of(5, -100, 5002);
    const res: Float32Array[][] = [];
    for (const be of [gpu, cpu] as Backend[]) {
      const xv = at(be, x, 1);
      const y = be.alloc("f32", rows * cols, "other");
      const yl = be.alloc("f32", rows * cols, "other");
      const t = be.alloc("i32", rows, "other");
      be.write({ buf: t, off: 0 }, tg);
      const loss = be.alloc("f32", rows, "other");
      const dl = be.alloc("f32", rows * cols, "other");
      be.softmax(xv, { buf: y, off: 0 }, rows, cols, false);
      be.softmax(xv, { buf: yl, off: 0 }, rows, cols, true);
      be.crossEntropy(xv, { buf: t, off: 0 }, { buf: loss, off: 0 }, { buf: dl, off: 0 }, rows, cols, -100, 0.5);
      const r: Float32Array[] = [];
      for (const [b, n] of [[y, rows * cols], [yl, rows * cols], [loss, rows], [dl, rows * cols]] as const) r.push((await be.read({ buf: b, off: 0 }, n)) as Float32Array);
      res.push(r);
      for (const b of [xv.buf, y, yl, t, loss, dl]) be.free(b);
    }
    for (let i = 0; i < 4; i++) expect(close(res[0]![i]!, res[1]![i]!, 2e-5, 1e-7)).toBe("ok");
  });

  test("wide rows: rmsnorm and layernorm forward/backward and softmax backward match the cpu backend", async () => {
    const rows = 3;
    const cols = 4099;
    const x = rand(rows * cols, 22);
    const w = rand(cols, 23);
    const bias = rand(cols, 24);
    const dy = rand(rows * cols, 25);
    const res: Float32Array[][] = [];
    for (const be of [gpu, cpu] as Backend[]) {
      const xv = at(be, x);
      const wv = at(be, w);
      const bv = at(be, bias);
      const dyv = at(be, dy);
      const o = (n: number): View => ({ buf: be.alloc("f32", n, "other"), off: 0 });
      const [y, r, dx, dw, y2, mu, r2, dx2, dw2, db2, sy, sdx] = [rows * cols, rows, rows * cols, cols, rows * cols, rows, rows, rows * cols, cols, cols, rows * cols, rows * cols].map(o);
      be.rmsnorm(xv, wv, y!, r!, rows, cols, 1e-5);
      be.rmsnormBackward(xv, wv, r!, dyv, dx!, dw!, rows, cols);
      be.layernorm(xv, wv, bv, y2!, mu!, r2!, rows, cols, 1e-5);
      be.layernormBackward(xv, wv, mu!, r2!, dyv, dx2!, dw2!, db2!, rows, cols);
      be.softmax(xv, sy!, rows, cols, false);
      be.softmaxBackward(sy!, dyv, sdx!, rows, cols, false);
      const out: Float32Array[] = [];
      for (const v of [y, dx, dw, y2, dx2, dw2, db2, sdx]) out.push((await be.read(v!, v!.buf.length)) as Float32Array);
      res.push(out);
      for (const v of [xv, wv, bv, dyv, y, r, dx, dw, y2, mu, r2, dx2, dw2, db2, sy, sdx]) be.free(v!.buf);
    }
    for (let i = 0; i < res[0]!.length; i++) expect(`${i}: ${close(res[0]![i]!, res[1]![i]!, 1e-4, 2e-5)}`).toBe(`${i}: ok`);
  });

  test("reduce in its two-stage column form (n > 64, inner ≥ 32) matches the cpu backend for every op", async () => {
    for (const [outer, n, inner] of [[3, 131, 37], [1, 1000, 64]] as const) {
      const x = rand(outer * n * inner, 26 + n).map((v) => v * 3);
      for (const op of ["sum", "mean", "max", "sumsq"] as const) {
        const res: Float32Array[] = [];
        for (const be of [gpu, cpu] as Backend[]) {
          const xv = at(be, x, 5);
          const o = be.alloc("f32", outer * inner + 2, "other");
          be.reduce(op, xv, { buf: o, off: 1 }, outer, n, inner);
          res.push((await be.read({ buf: o, off: 0 }, outer * inner + 2)) as Float32Array);
          be.free(xv.buf);
          be.free(o);
        }
        expect(`${op} [${outer},${n},${inner}]: ${close(res[0]!, res[1]!, 1e-5, 2e-4)}`).toBe(`${op} [${outer},${n},${inner}]: ok`);
      }
    }
  });

  test("views of one buffer bound together (axpy, matmul, adamw in one flat buffer) match the cpu backend", async () => {
    const [M, N, K] = [13, 7, 11];
    const flat = rand(M * K + K * N + M * N + 3 * 50 + 4, 12).map((v, i) => (i >= M * K + K * N + M * N + 50 ? Math.abs(v) * 0.01 : v));
    const res: Float32Array[] = [];
    for (const be of [gpu, cpu] as Backend[]) {
      const v = at(be, flat);
      const b = v.buf;
      const oA = 0;
      const oB = M * K;
      const oC = M * K + K * N;
      const oP = oC + M * N;
      be.matmul({ buf: b, off: oA }, { buf: b, off: oB }, { buf: b, off: oC }, { M, N, K, accumulate: true });
      be.axpy(0.25, { buf: b, off: oA }, { buf: b, off: oB }, 40); // y overlaps nothing it reads
      be.adamw({ buf: b, off: oP }, { buf: b, off: oA }, { buf: b, off: oP + 50 }, { buf: b, off: oP + 100 }, null, 50, { lr: 0.01, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.1, decoupled: true, step: 2, gradScale: 1 });
      res.push((await be.read({ buf: b, off: 0 }, flat.length)) as Float32Array);
      be.free(b);
    }
    expect(close(res[0]!, res[1]!, 1e-5, 1e-6)).toBe("ok");
  });
});

describe("allocation", () => {
  test("a buffer above the device's bindable size is held in segments of the device's largest binding", () => {
    // (allocating one here would take GiBs: kernels/test/webgpu/segmented.test.ts exercises segments
    // under a lowered maxBindingBytes)
    const max = Math.min(gpu.device.limits.maxBufferSize, gpu.device.limits.maxStorageBufferBindingSize);
    expect(gpu.segmentElems).toBe(Math.floor(max / 16) * 4);
    expect(() => gpu.alloc("f32", -1, "activation")).toThrow(/non-negative integer.*activation/);
    expect(gpu.memory().current.activation).toBe(0);
  });
});

describe("batching", () => {
  test("automatic submits, host writes after recorded work, freeing buffers pending work uses", async () => {
    const n = 37;
    const x0 = rand(n, 13);
    const x1 = rand(n, 14);
    const be = small;
    const before = be.stats().submits;
    const x = at(be, x0);
    const y = be.alloc("f32", n, "other");
    be.fill({ buf: y, off: 0 }, 1, n);
    for (let i = 0; i < 10; i++) be.axpy(0.5, x, { buf: y, off: 0 }, n); // 11 dispatches, batches of 3
    be.write(x, x1); // must not overtake the recorded axpys
    be.axpy(2, x, { buf: y, off: 0 }, n);
    const tmp = at(be, x1);
    const z = be.alloc("f32", n, "other");
    be.unary("exp", tmp, { buf: z, off: 0 }, n);
    be.free(tmp.buf); // still used by the recorded exp
    const got = (await be.read({ buf: y, off: 0 }, n)) as Float32Array;
    const gz = (await be.read({ buf: z, off: 0 }, n)) as Float32Array;
    const want = Float32Array.from(x0, (v, i) => {
      let s = 1;
      for (let k = 0; k < 10; k++) s = Math.fround(s + Math.fround(0.5 * v));
      return Math.fround(s + Math.fround(2 * x1[i]!));
    });
    expect(close(got, want, 1e-6, 1e-7)).toBe("ok");
    expect(close(gz, x1.map(Math.exp), 1e-6, 0)).toBe("ok");
    expect(be.stats().submits - before).toBeGreaterThanOrEqual(4);
    be.free(x.buf);
    be.free(y);
    be.free(z);
  });

  test("16-bit writes at odd offsets and odd lengths keep the neighbouring halves", async () => {
    const b = gpu.alloc("bf16", 11, "other");
    gpu.write({ buf: b, off: 0 }, Uint16Array.from({ length: 11 }, (_, i) => 100 + i));
    gpu.write({ buf: b, off: 3 }, Uint16Array.of(7, 8, 9));
    gpu.write({ buf: b, off: 8 }, Uint16Array.of(5));
    const got = Array.from((await gpu.read({ buf: b, off: 0 }, 11)) as Uint16Array);
    expect(got).toEqual([100, 101, 102, 7, 8, 9, 106, 107, 5, 109, 110]);
    expect(Array.from((await gpu.read({ buf: b, off: 5 }, 3)) as Uint16Array)).toEqual([9, 106, 107]);
    gpu.free(b);
  });
});

describe("profiling", () => {
  test("profile: true times every dispatch per kernel label and leaves results unchanged", async () => {
    const g = createGPU();
    if (!(await offersTimestamps(g))) {
      await expect(WebGpuBackend.create(g, { profile: true })).rejects.toThrow(/timestamp-query/);
      return;
    }
    const be = await WebGpuBackend.create(g, { profile: true, maxBatch: 4 });
    const n = 1000;
    const x = at(be, rand(n, 30));
    const y = be.alloc("f32", n, "other");
    for (let i = 0; i < 5; i++) be.unary("exp", x, { buf: y, off: 0 }, n);
    be.axpy(2, x, { buf: y, off: 0 }, n);
    const got = (await be.read({ buf: y, off: 0 }, n)) as Float32Array;
    const xs = (await be.read(x, n)) as Float32Array;
    expect(close(got, xs.map((v) => Math.exp(v) + 2 * v), 1e-6, 1e-6)).toBe("ok");
    const prof = await be.profile();
    const byLabel = new Map(prof.map((p) => [p.label, p]));
    expect(byLabel.get("unary_exp")?.dispatches).toBe(5);
    expect(byLabel.get("axpy")?.dispatches).toBe(1);
    for (const p of prof) expect(p.ns).toBeGreaterThanOrEqual(0);
    console.log(`profile on ${be.info.adapter}: ${prof.map((p) => `${p.label} ×${p.dispatches} ${(p.ns / 1e3).toFixed(1)} µs`).join(", ")}`);
    be.resetProfile();
    expect(await be.profile()).toEqual([]);
    be.destroy();
  });
});

describe("determinism", () => {
  test("sumSquares, scatterAddRows and attentionBackward are bit-identical across runs", async () => {
    const n = 50001;
    const x = at(gpu, rand(n, 15).map((v) => v * 3));
    const out = gpu.alloc("f32", 1, "other");
    const rows = 97;
    const dim = 19;
    const idx = gpu.alloc("i32", rows, "other");
    gpu.write({ buf: idx, off: 0 }, Int32Array.from({ length: rows }, (_, i) => (i * 7) % 5 === 0 ? -1 : (i * 13) % 11));
    const src = at(gpu, rand(rows * dim, 16));
    const acc = gpu.alloc("f32", 11 * dim, "other");
    const [B, S, H, Hkv, D] = [1, 9, 2, 1, 8];
    const q = at(gpu, rand(B * S * H * D, 17));
    const k = at(gpu, rand(B * S * Hkv * D, 18));
    const v = at(gpu, rand(B * S * Hkv * D, 19));
    const o = gpu.alloc("f32", B * S * H * D, "other");
    const lse = gpu.alloc("f32", B * H * S, "other");
    const dout = at(gpu, rand(B * S * H * D, 20));
    const grads = [B * S * H * D, B * S * Hkv * D, B * S * Hkv * D].map((m) => gpu.alloc("f32", m, "other"));
    const runs: number[][] = [];
    for (let r = 0; r < 2; r++) {
      gpu.sumSquares(x, { buf: out, off: 0 }, n);
      gpu.fill({ buf: acc, off: 0 }, 0.5, 11 * dim);
      gpu.scatterAddRows(src, { buf: idx, off: 0 }, null, { buf: acc, off: 0 }, rows, dim);
      gpu.attention(q, k, v, { buf: o, off: 0 }, { buf: lse, off: 0 }, B, S, H, Hkv, D, 0.3);
      gpu.attentionBackward(q, k, v, { buf: o, off: 0 }, { buf: lse, off: 0 }, dout, { buf: grads[0]!, off: 0 }, { buf: grads[1]!, off: 0 }, { buf: grads[2]!, off: 0 }, B, S, H, Hkv, D, 0.3);
      const all: number[] = [...((await gpu.read({ buf: out, off: 0 }, 1)) as Float32Array), ...((await gpu.read({ buf: acc, off: 0 }, 11 * dim)) as Float32Array)];
      for (const g of grads) all.push(...((await gpu.read({ buf: g, off: 0 }, g.length)) as Float32Array));
      runs.push(all);
    }
    expect(runs[0]!.every((val, i) => Object.is(val, runs[1]![i]))).toBe(true);
    // and the sum of squares is right
    const xs = (await gpu.read(x, n)) as Float32Array;
    let s = 0;
    for (const e of xs) s += e * e;
    expect(Math.abs(runs[0]![0]! - s) / s).toBeLessThan(1e-5);
  });
});
