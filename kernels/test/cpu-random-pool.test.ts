/**
 * The cpu backend's threaded random fill (kernels/src/cpu/random-pool.ts): any thread count, shared
 * or unshared memory, a view at a byte offset — the same bits as one `philoxFill`; worker threads do
 * take shares; and the cpu backend's randomFill of a large 16-bit view equals the f32 values cast.
 */
import { describe, expect, test } from "bun:test";
import type { RandomFillSpec } from "../src/backend.ts";
import { CpuBackend } from "../src/cpu/index.ts";
import { PARALLEL_MIN_ELEMENTS, SHARE_ELEMENTS, philoxFillThreaded } from "../src/cpu/random-pool.ts";
import { philoxFill } from "../src/numerics/random-fill.ts";
import { bf16FromF32 } from "../src/numerics/index.ts";

const n = PARALLEL_MIN_ELEMENTS + 3 * SHARE_ELEMENTS + 17;
const spec: RandomFillSpec = { dist: "normal", key: [31, 41], start: 2 ** 33 + 7, std: 0.02 };
const ref = new Float32Array(n);
philoxFill(ref, spec);

function firstMismatch(a: Float32Array, b: Float32Array): number {
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}

describe("threaded random fill", () => {
  test("1, 2, 3 and 5 threads, shared and unshared memory, a view at a byte offset: same bits as philoxFill", () => {
    for (const threads of [1, 2, 3, 5]) {
      for (const sab of [true, false]) {
        const buf = sab ? new SharedArrayBuffer(4 * (n + 9)) : new ArrayBuffer(4 * (n + 9));
        const out = new Float32Array(buf, 4 * 9, n);
        new Float32Array(buf, 0, 9).fill(7);
        philoxFillThreaded(out, spec, threads);
        expect(firstMismatch(out, ref)).toBe(-1);
        expect(Array.from(new Float32Array(buf, 0, 9))).toEqual([7, 7, 7, 7, 7, 7, 7, 7, 7]);
      }
    }
  }, 300_000);

  test("worker threads take shares (bounded retries: a worker may not have started yet)", () => {
    const out = new Float32Array(new SharedArrayBuffer(4 * n));
    let helped = 0;
    for (let attempt = 0; attempt < 50 && helped === 0; attempt++) {
      helped = philoxFillThreaded(out, spec, 3);
      expect(firstMismatch(out, ref)).toBe(-1);
      if (helped === 0) Bun.sleepSync(50);
    }
    expect(helped).toBeGreaterThan(0);
    expect(philoxFillThreaded(new Float32Array(n), spec, 3)).toBe(0); // unshared memory: the caller alone
  }, 300_000);

  test("the cpu backend's randomFill of a large bf16 view equals philoxFill cast to bf16", async () => {
    const be = new CpuBackend();
    const b = be.alloc("bf16", n + 2, "other");
    be.randomFill({ buf: b, off: 1 }, n, spec);
    const got = (await be.read({ buf: b, off: 0 }, n + 2)) as Uint16Array;
    let bad = -1;
    for (let i = 0; i < n && bad < 0; i++) if (got[i + 1] !== bf16FromF32(ref[i]!)) bad = i;
    expect(bad).toBe(-1);
    expect([got[0], got[n + 1]]).toEqual([0, 0]);
  }, 300_000);
});
