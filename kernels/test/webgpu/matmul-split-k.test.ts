/**
 * Split-K weight-gradient matmul (kernels/src/wgsl/matmul-split-k.ts) through the webgpu backend's
 * matmul op (lavapipe in CI) against a float64 reference: chunks that divide K and chunks with a
 * remainder, accumulate on and off, element offsets; plus the planner's rules.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { MatmulSpec, View } from "../../src/backend.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { planSplitK } from "../../src/wgsl/matmul-split-k.ts";

function rand(n: number, seed: number): Float32Array {
  let s = seed >>> 0 || 1;
  return Float32Array.from({ length: n }, () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return (s / 2 ** 32) * 2 - 1;
  });
}

let be: WebGpuBackend;
beforeAll(async () => {
  be = await WebGpuBackend.create(createGPU(), { matmulSplitK: true });
});
afterAll(() => be.destroy());

const limits = () => ({ maxComputeWorkgroupStorageSize: be.device.limits.maxComputeWorkgroupStorageSize, maxComputeInvocationsPerWorkgroup: be.device.limits.maxComputeInvocationsPerWorkgroup });

describe("split-K matmul", () => {
  test("planner: only Aᵀ·B of batch 1 with few output tiles and long K", () => {
    const big = { maxComputeWorkgroupStorageSize: 49152, maxComputeInvocationsPerWorkgroup: 1024 };
    // 1024×1024 from 8192 rows: 32 tiles of 128×256 → 4 chunks of 2048
    expect(planSplitK({ M: 1024, N: 1024, K: 8192, transA: true }, big)).toEqual({ splits: 4, chunk: 2048, rem: 0, scratchElems: 4 * 1024 * 1024 });
    // 2816×1024: 88 tiles → 2 chunks; 256×512 from 5000 rows: 4 tiles want 32 chunks, capped at ⌊5000/512⌋ = 9 (remainder 5)
    expect(planSplitK({ M: 2816, N: 1024, K: 8192, transA: true }, big)).toEqual({ splits: 2, chunk: 4096, rem: 0, scratchElems: 2 * 2816 * 1024 });
    expect(planSplitK({ M: 256, N: 512, K: 5000, transA: true }, big)).toEqual({ splits: 9, chunk: 555, rem: 5, scratchElems: 10 * 256 * 512 });
    expect(planSplitK({ M: 256, N: 1024, K: 8192, transA: true }, big)?.splits).toBe(16);
    expect(planSplitK({ M: 1024, N: 1024, K: 8192 }, big)).toBeNull(); // not transposed
    expect(planSplitK({ M: 1024, N: 1024, K: 8192, transA: true, transB: true }, big)).toBeNull();
    expect(planSplitK({ M: 1024, N: 1024, K: 8192, transA: true, batch: 2 }, big)).toBeNull();
    expect(planSplitK({ M: 1024, N: 1024, K: 900, transA: true }, big)).toBeNull(); // chunks would be < 512 rows
    expect(planSplitK({ M: 4096, N: 4096, K: 8192, transA: true }, big)).toBeNull(); // enough tiles
  });

  // [M, N, K]: K = 2·550 (two chunks, no remainder); K = 3·512 + 1 (remainder of one row); primes in M, N
  for (const [M, N, K] of [[130, 70, 1100], [37, 131, 1537], [5, 3, 2048]] as const) {
    for (const accumulate of [false, true]) {
      test(`M ${M} N ${N} K ${K} accumulate ${accumulate} = float64 reference`, async () => {
        const spec: MatmulSpec = { M, N, K, transA: true, accumulate };
        const plan = planSplitK(spec, limits());
        expect(plan).not.toBeNull();
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
              s += a[k * M + i]! * b[k * N + j]!;
              mag += Math.abs(a[k * M + i]! * b[k * N + j]!);
            }
            worst = Math.max(worst, Math.abs(got[i * N + j]! - s) / (mag + 1e-30));
          }
        }
        expect(worst).toBeLessThan(1e-6);
        for (const v of [av, bv, cv]) be.free(v.buf);
      }, 60000);
    }
  }
});
