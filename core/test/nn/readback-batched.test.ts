/**
 * `readTensorsBatched` (core/src/nn/moe/readback.ts): host copies of many small tensors of mixed
 * dtypes (the MoE expert counts and the routers' statistics), one staging read per dtype — and on
 * the webgpu backend all those reads in flight together, so the host waits for the device once per
 * batch, not once per dtype. Random values at awkward sizes, on cpu and webgpu. And deferred reads
 * started without waiting (`startDeferredReads`) deliver their values, in queue order, before the
 * next flush returns.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, type Backend } from "@zeromoe/kernels";
import { fromArray, noGrad, type Tensor } from "../../src/tensor/index.ts";
import { deferRead, deferredReadCount, flushDeferredReads, readTensorsBatched, startDeferredReads } from "../../src/nn/moe/readback.ts";

function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0);
}

async function check(be: Backend): Promise<number> {
  const r = lcg(7);
  const specs: [("f32" | "i32" | "u32"), number][] = [["i32", 13], ["f32", 5], ["i32", 1], ["u32", 17], ["f32", 0], ["i32", 7], ["f32", 11], ["u32", 3]];
  const host = specs.map(([dt, n]) => (dt === "f32" ? Float32Array.from({ length: n }, () => r() / 2 ** 32 - 0.5) : dt === "i32" ? Int32Array.from({ length: n }, () => (r() | 0) % 1000) : Uint32Array.from({ length: n }, () => r() % 5000)));
  let inFlight = 0;
  let most = 0;
  const read = be.read.bind(be);
  be.read = async (v, n) => {
    most = Math.max(most, ++inFlight);
    try {
      return await read(v, n);
    } finally {
      inFlight--;
    }
  };
  try {
    await noGrad(async () => {
      const ts: Tensor[] = specs.map(([dt, n], i) => fromArray(be, host[i]!, [n], dt));
      const got = await readTensorsBatched(ts);
      expect(got.length).toBe(specs.length);
      got.forEach((g, i) => {
        expect(g.constructor).toBe(host[i]!.constructor);
        expect(Array.from(g)).toEqual(Array.from(host[i]!));
      });
      for (const t of ts) t.dispose();
    });
  } finally {
    be.read = read;
  }
  return most;
}

describe("readTensorsBatched", () => {
  test("mixed dtypes and sizes (0, 1, primes) come back exactly, in order, on cpu", async () => {
    await check(new CpuBackend());
  });
  test("on webgpu the same, with the three dtype groups' reads in flight together", async () => {
    const { backend } = await createBackend("webgpu");
    try {
      expect(await check(backend)).toBe(3);
    } finally {
      (backend as Backend & { destroy?: () => void }).destroy?.();
    }
  });
});

describe("deferred reads started without waiting", () => {
  for (const kind of ["cpu", "webgpu"] as const) {
    test(`${kind}: callbacks run in queue order with the right values, all before the next flush returns`, async () => {
      const be = kind === "cpu" ? new CpuBackend() : (await createBackend("webgpu")).backend;
      try {
        await noGrad(async () => {
          const got: string[] = [];
          const a = fromArray(be, Float32Array.of(1.5, -2, 3), [3]);
          const b = fromArray(be, Int32Array.of(7, 11), [2], "i32");
          const c = fromArray(be, Float32Array.of(0.25), [1]);
          deferRead([a, b], (v) => got.push(`ab ${Array.from(v[0]!)} ${Array.from(v[1]!)}`));
          deferRead([c], (v) => got.push(`c ${Array.from(v[0]!)}`));
          startDeferredReads();
          expect(deferredReadCount()).toBe(0);
          const d = fromArray(be, Uint32Array.of(5, 0, 9), [3], "u32");
          deferRead([d], (v) => got.push(`d ${Array.from(v[0]!)}`));
          startDeferredReads(); // a second batch in flight behind the first
          const e = fromArray(be, Float32Array.of(-4), [1]);
          deferRead([e], (v) => got.push(`e ${Array.from(v[0]!)}`));
          const f = fromArray(be, Int32Array.of(-3, 8), [2], "i32");
          const extra = await flushDeferredReads([f]);
          expect(Array.from(extra[0]!)).toEqual([-3, 8]);
          expect(got).toEqual(["ab 1.5,-2,3 7,11", "c 0.25", "d 5,0,9", "e -4"]);
          expect(deferredReadCount()).toBe(0);
          for (const t of [a, b, c, d, e, f]) t.dispose();
        });
      } finally {
        (be as Backend & { destroy?: () => void }).destroy?.();
      }
    });
  }
});
