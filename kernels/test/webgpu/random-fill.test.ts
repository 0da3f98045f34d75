/**
 * `randomFill` on the webgpu backend (lavapipe in CI) equals the cpu backend bit for bit: normal and
 * uniform streams, many keys, stream starts (odd, even, past 2^32 counters, near 2^53), awkward
 * lengths, f32 / bf16 / f16 destinations at odd and even offsets (the neighbours of the view kept),
 * the scales model initialisation uses (std 0.02, 1, 0, a non-power-of-two like 0.0173) and uniform
 * bounds with lo ≠ 0; and views across the segments of a tensor larger than one binding (a backend
 * with maxBindingBytes lowered to 4 KiB).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Backend, DType, RandomFillSpec } from "../../src/backend.ts";
import { CpuBackend } from "../../src/cpu/index.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";

let gpu: WebGpuBackend;
const cpu: Backend = new CpuBackend();
beforeAll(async () => {
  gpu = await WebGpuBackend.create(createGPU());
});
afterAll(() => gpu.destroy());

/** The raw bits of `n` elements written by randomFill at offset `off` of a buffer of `len`
 * elements first filled with a sentinel (so writes outside the view show). */
async function fillBits(be: Backend, dtype: DType, len: number, off: number, n: number, spec: RandomFillSpec): Promise<number[]> {
  const b = be.alloc(dtype, len, "other");
  be.fill({ buf: b, off: 0 }, -7.25, len);
  be.randomFill({ buf: b, off }, n, spec);
  const raw = await be.read({ buf: b, off: 0 }, len);
  be.free(b);
  const bits = dtype === "f32" ? new Uint32Array(new Float32Array(raw as Float32Array).buffer) : (raw as Uint16Array);
  return Array.from(bits);
}

const KEYS: [number, number][] = [[0, 0], [0x9e3779b9, 0x7f4a7c15], [0xffffffff, 0xffffffff], [12345, 678910]];
const STARTS = [0, 1, 2, 3, 1023, 4294967295 * 2 + 1, 2 ** 40 + 5, 2 ** 53 - 5000];
const LENS = [1, 2, 3, 5, 257, 1031];

describe("randomFill: webgpu equals cpu bit for bit", () => {
  test("normal streams, f32, keys × starts × lengths × scales", async () => {
    let checked = 0;
    for (const key of KEYS) {
      for (const start of STARTS) {
        for (const n of LENS) {
          for (const std of [1, 0.02, 0.0173]) {
            const spec: RandomFillSpec = { dist: "normal", key, start, std };
            const off = (start + n) % 3;
            const want = await fillBits(cpu, "f32", n + 4, off, n, spec);
            const got = await fillBits(gpu, "f32", n + 4, off, n, spec);
            expect(got).toEqual(want);
            checked += n;
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(100000);
  }, 600_000);

  test("a long normal stream (1 << 20 elements) and std 0", async () => {
    const spec: RandomFillSpec = { dist: "normal", key: [7, 11], start: 99, std: 0.02 };
    expect(await fillBits(gpu, "f32", 1 << 20, 0, 1 << 20, spec)).toEqual(await fillBits(cpu, "f32", 1 << 20, 0, 1 << 20, spec));
    const zero = await fillBits(gpu, "f32", 10, 1, 8, { dist: "normal", key: [7, 11], start: 0, std: 0 });
    expect(zero.slice(1, 9).every((b) => b === 0)).toBe(true);
  }, 600_000);

  test("uniform streams, f32", async () => {
    for (const key of KEYS) {
      for (const start of STARTS) {
        for (const n of LENS) {
          for (const [lo, hi] of [[0, 1], [-0.05, 0.05], [0.25, 3.5], [-2, -1]]) {
            const spec: RandomFillSpec = { dist: "uniform", key, start, lo: lo!, hi: hi! };
            const off = (start + 2 * n) % 4;
            expect(await fillBits(gpu, "f32", n + 5, off, n, spec)).toEqual(await fillBits(cpu, "f32", n + 5, off, n, spec));
          }
        }
      }
    }
  }, 600_000);

  test("16-bit destinations at odd and even offsets keep their neighbours", async () => {
    for (const dtype of ["bf16", "f16"] as const) {
      for (const dist of ["normal", "uniform"] as const) {
        for (const start of [0, 1, 6, 2 ** 33 + 3]) {
          for (const off of [0, 1, 2, 3]) {
            for (const n of [1, 2, 3, 4, 129, 1000]) {
              const spec: RandomFillSpec = dist === "normal" ? { dist, key: [5, 9], start, std: 0.02 } : { dist, key: [5, 9], start, lo: -0.1, hi: 0.1 };
              const len = off + n + 3;
              const want = await fillBits(cpu, dtype, len, off, n, spec);
              const got = await fillBits(gpu, dtype, len, off, n, spec);
              expect(got).toEqual(want);
            }
          }
        }
      }
    }
  }, 600_000);

  test("views across binding segments (maxBindingBytes 4 KiB): each piece at its own stream position", async () => {
    const seg = await WebGpuBackend.create(createGPU(), { maxBindingBytes: 4096 });
    try {
      for (const dtype of ["f32", "bf16", "f16"] as const) {
        for (const [off, n] of [[0, 5000], [1023, 3000], [3, 2049], [2047, 2]] as const) {
          for (const spec of [{ dist: "normal", key: [21, 22], start: 5, std: 0.02 }, { dist: "uniform", key: [21, 22], start: 2 ** 34 + 1, lo: -1, hi: 0.5 }] as RandomFillSpec[]) {
            const len = off + n + 7;
            expect(await fillBits(seg, dtype, len, off, n, spec)).toEqual(await fillBits(cpu, dtype, len, off, n, spec));
          }
        }
      }
    } finally {
      seg.destroy();
    }
  }, 600_000);
});
