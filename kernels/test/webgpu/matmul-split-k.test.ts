/**
 * Split-K matmul (kernels/src/wgsl/matmul-split-k.ts) through the webgpu backend's matmul op
 * (lavapipe in CI) against a float64 reference: the planner's weight-gradient splits and forced
 * chunk counts over all four layouts, chunks that divide K and chunks with a remainder, one row or
 * column, accumulate on and off, element offsets, a forced chunk tile; bit-identical reruns; plus
 * the planner's rules.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { MatmulSpec, View } from "../../src/backend.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { planSplitK } from "../../src/wgsl/matmul-split-k.ts";
import { randomF32 as rand } from "../../src/testing.ts";

let be: WebGpuBackend;
beforeAll(async () => {
  be = await WebGpuBackend.create(createGPU(), { matmulSplitK: true });
});
afterAll(() => be.destroy());

const limits = () => ({ maxComputeWorkgroupStorageSize: be.device.limits.maxComputeWorkgroupStorageSize, maxComputeInvocationsPerWorkgroup: be.device.limits.maxComputeInvocationsPerWorkgroup });

describe("split-K matmul", () => {
  test("planner: batch 1, few output tiles, long K; Aᵀ·B toward 256 workgroups, other layouts below and toward 128", () => {
    const big = { maxComputeWorkgroupStorageSize: 49152, maxComputeInvocationsPerWorkgroup: 1024 };
    const t = { tile: { BM: 128, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 }, prefetchDistance: 4 };
    // 1024×1024 from 8192 rows: 64 tiles of 128×128 → 4 chunks of 2048
    expect(planSplitK({ M: 1024, N: 1024, K: 8192, transA: true }, big)).toEqual({ splits: 4, chunk: 2048, rem: 0, scratchElems: 4 * 1024 * 1024, tile: t });
    // 2816×1024: 176 tiles → 2 chunks; 256×512 from 5000 rows: 8 tiles want 32 chunks, capped at 16 (312 rows, remainder 8)
    expect(planSplitK({ M: 2816, N: 1024, K: 2048, transA: true }, big)).toEqual({ splits: 2, chunk: 1024, rem: 0, scratchElems: 2 * 2816 * 1024, tile: t });
    expect(planSplitK({ M: 256, N: 512, K: 5000, transA: true }, big)).toEqual({ splits: 16, chunk: 312, rem: 8, scratchElems: 17 * 256 * 512, tile: t });
    // chunks stay ≥ 256 rows: 512×1024 from 1024 rows wants 8 chunks, gets 4
    expect(planSplitK({ M: 512, N: 1024, K: 1024, transA: true }, big)?.splits).toBe(4);
    expect(planSplitK({ M: 256, N: 1024, K: 8192, transA: true }, big)?.splits).toBe(16);
    // other layouts: 64 tiles → 2 chunks of 128×128×16 (128 workgroups); 128 tiles or more: none
    const t16 = { tile: { BM: 128, BN: 128, BK: 16, TM: 8, TN: 8, padA: 0, padB: 0 }, prefetchDistance: 4 };
    expect(planSplitK({ M: 1024, N: 1024, K: 8192 }, big)).toEqual({ splits: 2, chunk: 4096, rem: 0, scratchElems: 2 * 1024 * 1024, tile: t16 });
    expect(planSplitK({ M: 1024, N: 512, K: 1024, transB: true }, big)?.splits).toBe(4);
    expect(planSplitK({ M: 4096, N: 512, K: 1024, transB: true }, big)).toBeNull();
    expect(planSplitK({ M: 1024, N: 1024, K: 300 }, big)).toBeNull(); // chunks would be < 256
    // WebGPU's default limits (16 KiB) have no room for 128×128×16: 128×128×8 chunks
    expect(planSplitK({ M: 1024, N: 1024, K: 8192 })?.tile).toEqual(t);
    expect(planSplitK({ M: 1024, N: 1024, K: 8192, transA: true, transB: true }, big)?.splits).toBe(4);
    expect(planSplitK({ M: 1024, N: 1024, K: 8192, transA: true, batch: 2 }, big)).toBeNull();
    expect(planSplitK({ M: 1024, N: 1024, K: 511, transA: true }, big)).toBeNull(); // chunks would be < 256 rows
    expect(planSplitK({ M: 2048, N: 2048, K: 8192, transA: true }, big)).toBeNull(); // 256 tiles: enough
    // forced counts (tuning): any count ≥ 2 up to K, ≤ 1 never splits, a non-integer is refused
    expect(planSplitK({ M: 4096, N: 4096, K: 100, transA: true }, big, 3)).toEqual({ splits: 3, chunk: 33, rem: 1, scratchElems: 4 * 4096 * 4096, tile: t });
    expect(planSplitK({ M: 64, N: 64, K: 100, transA: true }, big, 1)).toBeNull();
    expect(planSplitK({ M: 64, N: 64, K: 2, transA: true }, big, 3)).toBeNull();
    expect(() => planSplitK({ M: 64, N: 64, K: 100, transA: true }, big, 2.5)).toThrow(/integer/);
  });

  // [M, N, K]: K = 4·275 (four chunks, no remainder); K = 4·384 + 1 (remainder of one row); 8
  // chunks of 256; primes in M, N
  for (const [M, N, K] of [[130, 70, 1100], [37, 131, 1537], [5, 3, 2048]] as const) {
    for (const accumulate of [false, true]) {
      test(`M ${M} N ${N} K ${K} accumulate ${accumulate} = float64 reference`, async () => {
        be.setKernelOptions({ matmulSplitK: true, matmulTuning: {} });
        await check({ M, N, K, transA: true, accumulate }, planSplitK({ M, N, K, transA: true }, limits()));
      }, 300_000);
    }
  }

  // forced chunk counts over every layout (chunks of A's or B's rows are column ranges there),
  // remainders, one row, K not a multiple of any tile's BK, and a forced chunk tile
  const cases: [number, number, number, boolean, boolean, number, string?][] = [
    [67, 45, 1001, false, false, 3], [1, 131, 517, false, true, 4], [53, 1, 389, true, true, 5],
    [130, 70, 1100, false, true, 2], [29, 97, 263, true, false, 7], [64, 128, 1000, false, false, 4, "64x64x8"],
  ];
  for (const [M, N, K, transA, transB, splits, tileName] of cases) {
    test(`forced ${splits} chunks: M ${M} N ${N} K ${K} ${transA ? "tA" : "nA"}${transB ? "tB" : "nB"}${tileName ? ` tile ${tileName}` : ""} = float64 reference`, async () => {
      const tile = tileName ? { tile: { BM: 64, BN: 64, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 } } : undefined;
      be.setKernelOptions({ matmulSplitK: false, matmulTuning: { splitK: splits, ...(tile ? { tile } : {}) } });
      for (const accumulate of [false, true]) await check({ M, N, K, transA, transB, accumulate }, planSplitK({ M, N, K, transA, transB }, limits(), splits));
      be.setKernelOptions({ matmulSplitK: true, matmulTuning: {} });
    }, 300_000);
  }

  test("same inputs give the same bits run to run (no atomics)", async () => {
    be.setKernelOptions({ matmulSplitK: false, matmulTuning: { splitK: 5 } });
    const M = 37, N = 41, K = 1203;
    const av = { buf: be.alloc("f32", M * K, "other"), off: 0 }, bv = { buf: be.alloc("f32", K * N, "other"), off: 0 };
    be.write(av, rand(M * K, 11));
    be.write(bv, rand(K * N, 12));
    const outs: Float32Array[] = [];
    for (let r = 0; r < 3; r++) {
      const cv = { buf: be.alloc("f32", M * N, "other"), off: 0 };
      be.matmul(av, bv, cv, { M, N, K });
      outs.push((await be.read(cv, M * N)) as Float32Array);
      be.free(cv.buf);
    }
    expect(Buffer.from(outs[1]!.buffer).equals(Buffer.from(outs[0]!.buffer))).toBe(true);
    expect(Buffer.from(outs[2]!.buffer).equals(Buffer.from(outs[0]!.buffer))).toBe(true);
    be.free(av.buf);
    be.free(bv.buf);
    be.setKernelOptions({ matmulSplitK: true, matmulTuning: {} });
  });
});

/** Runs `spec` through the backend (views at odd element offsets) and compares with a float64
 * reference: |err| / Σ|a·b| < 1e-6 everywhere. `plan` must be a split (the path under test). */
async function check(spec: MatmulSpec, plan: ReturnType<typeof planSplitK>): Promise<void> {
  expect(plan).not.toBeNull();
  const { M, N, K } = spec;
  const transA = spec.transA ?? false, transB = spec.transB ?? false, accumulate = spec.accumulate ?? false;
  const a = rand(K * M, M + K), b = rand(K * N, N + K), c0 = rand(M * N, 7);
  const put = (d: Float32Array, off: number): View => {
    const v = { buf: be.alloc("f32", d.length + off, "other"), off };
    be.write(v, d);
    return v;
  };
  const av = put(a, 3), bv = put(b, 1), cv = put(c0, 5);
  be.matmul(av, bv, cv, spec);
  const got = (await be.read(cv, M * N)) as Float32Array;
  let worst = 0;
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = accumulate ? c0[i * N + j]! : 0;
      let mag = Math.abs(s);
      for (let k = 0; k < K; k++) {
        const x = a[transA ? k * M + i : i * K + k]! * b[transB ? j * K + k : k * N + j]!;
        s += x;
        mag += Math.abs(x);
      }
      worst = Math.max(worst, Math.abs(got[i * N + j]! - s) / (mag + 1e-30));
    }
  }
  expect(worst).toBeLessThan(1e-6);
  for (const v of [av, bv, cv]) be.free(v.buf);
}
