/**
 * `readTensorsBatched` (core/src/nn/moe/readback.ts): host copies of many small tensors of mixed
 * dtypes (the MoE expert counts and the routers' statistics), one staging read per dtype — and on
 * the webgpu backend all those reads in flight together, so the host waits for the device once per
 * batch, not once per dtype. Random values at awkward sizes, on cpu and webgpu.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, type Backend } from "@zeromoe/kernels";
import { fromArray, noGrad, type Tensor } from "../../src/tensor/index.ts";
import { readTensorsBatched } from "../../src/nn/moe/readback.ts";

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
