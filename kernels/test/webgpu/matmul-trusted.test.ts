/**
 * Trusted shader modules (wgpu-native's wgpuDeviceCreateShaderModuleTrusted, kernels/src/ffi/shader.ts)
 * and the backend option `trustedShaders`: the matmul kernels compiled without naga's runtime checks
 * give the same bits as the checked ones (lavapipe in CI), at awkward sizes, through the split-K
 * path too; bad input is refused with a clear error.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { MatmulSpec, View } from "../../src/backend.ts";
import { createGPU, createShaderModuleTrusted, GPUShaderCompilationError } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { randomF32 as rand } from "../../src/testing.ts";

let checked: WebGpuBackend;
let trusted: WebGpuBackend;
beforeAll(async () => {
  checked = await WebGpuBackend.create(createGPU());
  trusted = await WebGpuBackend.create(createGPU(), { trustedShaders: ["mmf_", "matmul_split_k_reduce"] });
});
afterAll(() => {
  checked.destroy();
  trusted.destroy();
});

async function run(be: WebGpuBackend, spec: MatmulSpec, a: Float32Array, b: Float32Array, c0: Float32Array): Promise<Float32Array> {
  const put = (d: Float32Array, off: number): View => {
    const v = { buf: be.alloc("f32", d.length + off, "other"), off };
    be.write(v, d);
    return v;
  };
  const av = put(a, 1), bv = put(b, 2), cv = put(c0, 3);
  be.matmul(av, bv, cv, spec);
  const out = (await be.read(cv, c0.length)) as Float32Array;
  for (const v of [av, bv, cv]) be.free(v.buf);
  return out;
}

// 1 row, primes, K not a multiple of any BK, each layout; the last two split K (Aᵀ·B; nA·nB)
const specs: MatmulSpec[] = [
  { M: 1, N: 67, K: 37 },
  { M: 131, N: 29, K: 61, transB: true },
  { M: 53, N: 97, K: 83, transA: true, transB: true },
  { M: 70, N: 45, K: 1100, transA: true, accumulate: true },
  { M: 33, N: 17, K: 777 },
];
for (const spec of specs) {
  test(`trusted and checked matmul give the same bits: ${JSON.stringify(spec)}`, async () => {
    const { M, N, K } = spec;
    const a = rand(M * K, M + 3 * K), b = rand(K * N, N + 5 * K), c0 = rand(M * N, 9);
    const x = await run(checked, spec, a, b, c0), y = await run(trusted, spec, a, b, c0);
    expect(Buffer.from(y.buffer).equals(Buffer.from(x.buffer))).toBe(true);
    // and they are right: one output against a float64 dot product
    const i = M - 1, j = N - 1;
    let s = spec.accumulate ? c0[i * N + j]! : 0, mag = Math.abs(s);
    for (let k = 0; k < K; k++) {
      const p = a[spec.transA ? k * M + i : i * K + k]! * b[spec.transB ? j * K + k : k * N + j]!;
      s += p;
      mag += Math.abs(p);
    }
    expect(Math.abs(y[i * N + j]! - s) / mag).toBeLessThan(1e-6);
  }, 300_000);
}

test("createShaderModuleTrusted: compile errors throw GPUShaderCompilationError; a foreign device is refused", () => {
  expect(() => createShaderModuleTrusted(trusted.device, { label: "bad", code: "fn main( {" }, { boundsChecks: false, forceLoopBounding: false })).toThrow(GPUShaderCompilationError);
  const m = createShaderModuleTrusted(trusted.device, { label: "ok", code: "@compute @workgroup_size(1) fn main() {}" }, { boundsChecks: true, forceLoopBounding: false });
  expect(m.label).toBe("ok");
  expect(() => createShaderModuleTrusted({} as GPUDevice, { code: "" }, { boundsChecks: false, forceLoopBounding: false })).toThrow(/not a device of the wgpu-native FFI binding/);
});
