/**
 * The webgpu backend's host side: the pool of freed buffers (a recycled buffer reads as zeros
 * whatever its previous owner left, also when that owner's work is still unsubmitted, and a host
 * write lands after the zeroing), stable bind groups across repeated steps, early submits
 * (`submitAfter`), and the device-side optimizer scale (`clipScale` + AdamW `scaleFrom`) against a
 * float64 reference and the cpu backend — at awkward sizes, on random data.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { AdamWParams, Backend, View } from "../../src/backend.ts";
import { CpuBackend } from "../../src/cpu/index.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { bf16FromNumber } from "../../src/numerics/bf16.ts";
import { randomF32 as rand } from "../../src/testing.ts";
import { BindGroupCache } from "../../src/webgpu/bindgroups.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";

let gpu: WebGpuBackend;
let early: WebGpuBackend; // submitAfter 5
let nopool: WebGpuBackend;
const cpu = new CpuBackend();

beforeAll(async () => {
  const g = createGPU();
  gpu = await WebGpuBackend.create(g);
  early = await WebGpuBackend.create(g, { submitAfter: 5 });
  nopool = await WebGpuBackend.create(g, { bufferPoolBytes: 0 });
});
afterAll(() => {
  gpu.destroy();
  early.destroy();
  nopool.destroy();
});

const f32 = async (be: Backend, v: View, n: number): Promise<Float32Array> => Float32Array.from((await be.read(v, n)) as Float32Array);

describe("buffer pool", () => {
  test("a recycled buffer reads as zeros: after a write, after unsubmitted work, and under a partial write", async () => {
    const n = 1009; // prime
    const a = gpu.alloc("f32", n, "activation");
    gpu.write({ buf: a, off: 0 }, rand(n, 1));
    await gpu.flush();
    gpu.free(a);
    const before = gpu.stats();
    const b = gpu.alloc("f32", n, "activation"); // the same GPUBuffer, cleared ahead of its first use
    expect(gpu.stats().buffersReused).toBe(before.buffersReused + 1);
    expect(gpu.stats().buffersCreated).toBe(before.buffersCreated);
    expect(Array.from(await f32(gpu, { buf: b, off: 0 }, n)).every((x) => x === 0)).toBe(true);

    // freed while recorded, unsubmitted work still uses it: the new owner still sees zeros and the
    // old work its own data
    const src = gpu.alloc("f32", n, "activation");
    gpu.write({ buf: src, off: 0 }, rand(n, 2));
    gpu.affine({ buf: src, off: 0 }, { buf: b, off: 0 }, n, 2, 1); // b = 2·src + 1 (recorded)
    const keep = gpu.alloc("f32", n, "activation");
    gpu.copy({ buf: b, off: 0 }, { buf: keep, off: 0 }, n);
    gpu.free(b);
    const c = gpu.alloc("f32", n, "activation");
    gpu.axpy(1, { buf: src, off: 0 }, { buf: c, off: 0 }, n); // c = 0 + src
    const want = rand(n, 2);
    expect(Array.from(await f32(gpu, { buf: c, off: 0 }, n))).toEqual(Array.from(want));
    expect(Array.from(await f32(gpu, { buf: keep, off: 0 }, n))).toEqual(Array.from(want, (x) => Math.fround(Math.fround(2 * x) + 1)));

    // a partial host write into a freshly recycled buffer lands after its zeroing; a whole write
    // replaces the zeroing
    gpu.free(c);
    const d = gpu.alloc("f32", n, "activation");
    gpu.write({ buf: d, off: 7 }, Float32Array.of(3, 4, 5));
    const got = await f32(gpu, { buf: d, off: 0 }, n);
    expect(got[7]).toBe(3);
    expect(got[9]).toBe(5);
    expect(got.reduce((s, x) => s + Math.abs(x), 0)).toBe(12);
    gpu.free(d);
    const e = gpu.alloc("f32", n, "activation");
    const whole = rand(n, 3);
    gpu.write({ buf: e, off: 0 }, whole);
    expect(Array.from(await f32(gpu, { buf: e, off: 0 }, n))).toEqual(Array.from(whole));
    for (const x of [src, keep, e]) gpu.free(x);
  });

  test("a 16-bit recycled buffer is zero in every half word", async () => {
    const n = 13;
    const a = gpu.alloc("bf16", n, "activation");
    gpu.write({ buf: a, off: 0 }, Uint16Array.from({ length: n + 1 }, (_, i) => 0x3f80 + i).subarray(0, n));
    await gpu.flush();
    gpu.free(a);
    const b = gpu.alloc("bf16", n, "activation");
    gpu.write({ buf: b, off: 5 }, Uint16Array.of(0x4000)); // odd offset: a word-merging kernel
    const got = Array.from((await gpu.read({ buf: b, off: 0 }, n)) as Uint16Array);
    expect(got).toEqual(Array.from({ length: n }, (_, i) => (i === 5 ? 0x4000 : 0)));
    gpu.free(b);
  });

  test("the same sequence of allocations and ops binds the same buffers: no bind-group misses after the first round", async () => {
    const round = async (be: WebGpuBackend): Promise<Float32Array> => {
      const x = be.alloc("f32", 301, "activation");
      be.write({ buf: x, off: 0 }, rand(301, 4));
      const y = be.alloc("f32", 301, "activation");
      const z = be.alloc("f32", 97, "activation");
      be.affine({ buf: x, off: 0 }, { buf: y, off: 0 }, 301, 0.5, 0.25);
      be.axpy(2, { buf: y, off: 3 }, { buf: z, off: 0 }, 97);
      be.free(y);
      const w = be.alloc("f32", 301, "activation");
      be.axpy(1, { buf: x, off: 0 }, { buf: w, off: 0 }, 301);
      const out = await f32(be, { buf: z, off: 0 }, 97);
      for (const b of [x, z, w]) be.free(b);
      return out;
    };
    const first = await round(gpu);
    await round(gpu);
    const s0 = gpu.stats();
    for (let i = 0; i < 3; i++) expect(Array.from(await round(gpu))).toEqual(Array.from(first));
    const s1 = gpu.stats();
    expect(s1.bindGroupMisses).toBe(s0.bindGroupMisses);
    expect(s1.buffersCreated).toBe(s0.buffersCreated);
    // without the pool every round creates its buffers and bind groups afresh, same results
    const n0 = nopool.stats();
    expect(Array.from(await round(nopool))).toEqual(Array.from(first));
    const n1 = nopool.stats();
    expect(n1.buffersCreated - n0.buffersCreated).toBe(4);
    expect(n1.pooledBytes).toBe(0);
  });
});

describe("bind-group cache", () => {
  test("keyed by pipeline and buffer ids in order; forget drops every group binding a buffer; a full cache clears and counts each lookup once", () => {
    const c = new BindGroupCache(3);
    let made = 0;
    const make = () => ({ n: made++ }) as unknown as GPUBindGroup;
    const a = c.get(7, [1, 2], make);
    expect(c.get(7, [1, 2], make)).toBe(a);
    const b = c.get(7, [2, 1], make); // other binding order: another group
    const d = c.get(8, [1, 2], make); // other pipeline
    expect(new Set([a, b, d]).size).toBe(3);
    expect([c.hits, c.misses, c.size]).toEqual([1, 3, 3]);
    c.forget(1); // all three bind buffer 1
    expect(c.size).toBe(0);
    expect(c.get(7, [1, 2], make)).not.toBe(a);
    expect([c.hits, c.misses, c.size]).toEqual([1, 4, 1]);
    c.get(9, [3], make);
    c.get(9, [4], make);
    expect(c.size).toBe(3);
    c.get(9, [5], make); // full: cleared, then this one cached
    expect([c.hits, c.misses, c.size, made]).toEqual([1, 7, 1, 7]);
  });
});

describe("early submits", () => {
  test("submitAfter N: a long run of dispatches is submitted every N without any host read, results unchanged", async () => {
    const n = 513;
    const x = early.alloc("f32", n, "other");
    const want = rand(n, 5);
    early.write({ buf: x, off: 0 }, want);
    await early.flush();
    const s0 = early.stats();
    for (let i = 0; i < 23; i++) early.affine({ buf: x, off: 0 }, { buf: x, off: 0 }, n, 1, 0.5);
    const s1 = early.stats();
    expect(s1.submits - s0.submits).toBe(4); // 23 dispatches: submitted after the 5th, 10th, 15th, 20th
    expect(s1.reads).toBe(s0.reads);
    const got = await f32(early, { buf: x, off: 0 }, n);
    let ref = Float32Array.from(want);
    for (let i = 0; i < 23; i++) ref = ref.map((v) => Math.fround(v + 0.5));
    expect(Array.from(got)).toEqual(Array.from(ref));
    early.free(x);
  });
});

/** float64 reference of clipScale. */
function clipRef(parts: Float32Array, lsDiv: number, maxNorm: number): [number, number, number] {
  const s = parts.reduce((a, b) => a + b, 0);
  if (!Number.isFinite(s)) return [0, 1, s];
  const norm = Math.sqrt(s) / lsDiv;
  const coef = maxNorm > 0 ? Math.min(1, maxNorm / (norm + 1e-6)) : 1;
  return [coef / lsDiv, 0, s];
}

describe("device-side optimizer scale", () => {
  for (const [name, be] of [["cpu", () => cpu as Backend], ["webgpu", () => gpu as Backend]] as const) {
    test(`clipScale matches a float64 reference (counts 1, 37, 300; clipping on/off; inf and NaN skip) on ${name}`, async () => {
      const b = be();
      for (const [count, lsDiv, maxNorm] of [[1, 1, 1], [37, 3, 0.5], [300, 2 * 1024, 1e9], [37, 5, 0]] as const) {
        const parts = rand(count, 10 + count, 0, 4);
        const p = b.alloc("f32", count + 2, "other");
        b.write({ buf: p, off: 2 }, parts);
        const out = b.alloc("f32", 4, "other");
        b.clipScale({ buf: p, off: 2 }, count, { buf: out, off: 1 }, { lsDiv, maxNorm });
        const got = await f32(b, { buf: out, off: 0 }, 4);
        const want = clipRef(parts, lsDiv, maxNorm);
        expect(got[0]).toBe(0);
        expect(Math.abs(got[1]! - want[0]) / want[0]).toBeLessThan(1e-5);
        expect(got[2]).toBe(0);
        expect(Math.abs(got[3]! - want[2]) / want[2]).toBeLessThan(1e-5);
        for (const bad of [Infinity, NaN]) {
          b.write({ buf: p, off: 2 + (count >> 1) }, Float32Array.of(bad));
          b.clipScale({ buf: p, off: 2 }, count, { buf: out, off: 0 }, { lsDiv, maxNorm });
          const g2 = await f32(b, { buf: out, off: 0 }, 3);
          expect([g2[0], g2[1]]).toEqual([0, 1]);
          expect(Number.isFinite(g2[2]!)).toBe(false);
        }
        b.free(p);
        b.free(out);
      }
    });
  }

  test("AdamW with scaleFrom equals AdamW with gradScale·scale (cpu bit for bit, webgpu to f32 rounding); skip leaves p, m, v and the bf16 copy as they were", async () => {
    const n = 1031;
    const hp: AdamWParams = { lr: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, decoupled: true, step: 3, gradScale: 0.75 };
    const scale = 0.3125;
    const run = async (b: Backend, mode: "host" | "dev" | "skip"): Promise<Float32Array[]> => {
      const mk = (seed: number, lo = -1, hi = 1): View => {
        const buf = b.alloc("f32", n, "other");
        b.write({ buf, off: 0 }, rand(n, seed, lo, hi));
        return { buf, off: 0 };
      };
      const p = mk(20);
      const g = mk(21);
      const m = mk(22);
      const v = mk(23, 0, 1);
      const p16 = b.alloc("bf16", n, "other");
      b.write({ buf: p16, off: 0 }, Uint16Array.from(rand(n, 20), (x) => bf16FromNumber(x)));
      const s = b.alloc("f32", 3, "other");
      b.write({ buf: s, off: 0 }, Float32Array.of(scale, mode === "skip" ? 1 : 0, 7));
      if (mode === "host") b.adamw(p, g, m, v, { buf: p16, off: 0 }, n, { ...hp, gradScale: hp.gradScale * scale });
      else b.adamw(p, g, m, v, { buf: p16, off: 0 }, n, { ...hp, scaleFrom: { buf: s, off: 0 } });
      const out = [await f32(b, p, n), await f32(b, m, n), await f32(b, v, n), Float32Array.from((await b.read({ buf: p16, off: 0 }, n)) as Uint16Array)];
      for (const x of [p, g, m, v]) b.free(x.buf);
      b.free(p16);
      b.free(s);
      return out;
    };
    const [ch, cd, cs] = [await run(cpu, "host"), await run(cpu, "dev"), await run(cpu, "skip")];
    for (let k = 0; k < 4; k++) expect(Array.from(cd[k]!)).toEqual(Array.from(ch[k]!));
    const untouched = [rand(n, 20), rand(n, 22), rand(n, 23, 0, 1), Float32Array.from(rand(n, 20), (x) => bf16FromNumber(x))];
    for (let k = 0; k < 4; k++) expect(Array.from(cs[k]!)).toEqual(Array.from(untouched[k]!));
    const [gd, gs] = [await run(gpu, "dev"), await run(gpu, "skip")];
    for (let k = 0; k < 3; k++) {
      for (let i = 0; i < n; i++) expect(Math.abs(gd[k]![i]! - ch[k]![i]!)).toBeLessThanOrEqual(1e-6 + 1e-5 * Math.abs(ch[k]![i]!));
    }
    for (let k = 0; k < 4; k++) expect(Array.from(gs[k]!)).toEqual(Array.from(untouched[k]!));
  });
});
