/**
 * The host AdamW (src/host-adamw.ts) and its thread pool (src/adamw-pool.ts) against the cpu
 * backend's fused `adamw` (the device reference) on random data at awkward sizes: f32, bf16 and f16
 * gradients with 16-bit parameter output, AdamW and classic Adam, several steps — bit-identical,
 * also when split over 1, 2, 3 threads with tiny slices (worker threads on SharedArrayBuffers).
 */
import { afterAll, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { bf16FromNumber, CpuBackend, f16FromNumber, type AdamWParams } from "@zeromoe/kernels";
import { HostAdamWPool } from "../src/adamw-pool.ts";

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
}

function sharedF32(n: number, f: () => number): Float32Array {
  const a = new Float32Array(new SharedArrayBuffer(n * 4));
  for (let i = 0; i < n; i++) a[i] = f();
  return a;
}

const pools = [1, 2, 3].map((t) => new HostAdamWPool({ threads: t, minPerThread: 5 }));
afterAll(() => pools.forEach((p) => p.close()));

describe("host AdamW = cpu backend adamw, bit for bit", () => {
  for (const gradDtype of ["f32", "bf16", "f16"] as const) for (const decoupled of [true, false]) for (const n of [1, 97, 1031]) {
    test(`${gradDtype} grads, ${decoupled ? "AdamW" : "Adam"}, n ${n}`, async () => {
      const r = rng(n * 7 + (decoupled ? 1 : 0) + gradDtype.length);
      const be = new CpuBackend();
      const master0 = sharedF32(n, r);
      const g32 = sharedF32(n, () => r() * 3);
      let gradHost: Float32Array | Uint16Array = g32;
      if (gradDtype !== "f32") {
        const enc = gradDtype === "bf16" ? bf16FromNumber : f16FromNumber;
        gradHost = new Uint16Array(new SharedArrayBuffer(n * 2));
        for (let i = 0; i < n; i++) gradHost[i] = enc(g32[i]!);
      }
      const p16Dtype = gradDtype === "f16" ? "f16" : "bf16";
      // device reference
      const dMaster = be.alloc("f32", n, "optim");
      const dM = be.alloc("f32", n, "optim");
      const dV = be.alloc("f32", n, "optim");
      const dG = be.alloc(gradDtype, n, "grad");
      const dP = gradDtype === "f32" ? null : be.alloc(gradDtype, n, "param");
      be.write({ buf: dMaster, off: 0 }, master0);
      be.write({ buf: dG, off: 0 }, gradHost);
      const hosts = pools.map(() => ({ master: master0.slice(0) as Float32Array, m: sharedF32(n, () => 0), v: sharedF32(n, () => 0), p16: dP ? new Uint16Array(new SharedArrayBuffer(n * 2)) : null }));
      for (const h of hosts) {
        const mm = new Float32Array(new SharedArrayBuffer(n * 4));
        mm.set(h.master);
        h.master = mm;
      }
      for (let step = 1; step <= 3; step++) {
        const hp: AdamWParams = { lr: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, decoupled, step, gradScale: 0.37 };
        be.adamw({ buf: dMaster, off: 0 }, { buf: dG, off: 0 }, { buf: dM, off: 0 }, { buf: dV, off: 0 }, dP ? { buf: dP, off: 0 } : null, n, hp);
        for (let i = 0; i < pools.length; i++) {
          const h = hosts[i]!;
          await pools[i]!.step(h.master, gradHost, gradDtype, h.m, h.v, h.p16, p16Dtype, n, hp);
        }
      }
      const want = { master: await be.read({ buf: dMaster, off: 0 }, n), m: await be.read({ buf: dM, off: 0 }, n), v: await be.read({ buf: dV, off: 0 }, n), p16: dP ? await be.read({ buf: dP, off: 0 }, n) : null };
      for (const h of hosts) {
        expect(Array.from(h.master)).toEqual(Array.from(want.master));
        expect(Array.from(h.m)).toEqual(Array.from(want.m));
        expect(Array.from(h.v)).toEqual(Array.from(want.v));
        if (want.p16) expect(Array.from(h.p16!)).toEqual(Array.from(want.p16));
      }
      expect(Array.from(want.master).some((x, i) => x !== master0[i])).toBe(true);
    });
  }
  test("slices cover [0, n) once, in order, at most `threads` of them", () => {
    const p = new HostAdamWPool({ threads: 3, minPerThread: 5 });
    for (const n of [0, 1, 14, 15, 16, 100, 1031]) {
      const sl = p.slices(n);
      expect(sl.length).toBeLessThanOrEqual(3);
      let at = 0;
      for (const [lo, hi] of sl) {
        expect(lo).toBe(at);
        expect(hi).toBeGreaterThanOrEqual(lo);
        at = hi;
      }
      expect(at).toBe(n);
    }
  });
});
