/**
 * Per-operand power-of-two scaling of the tensor-core matmul (kernels/src/wgsl/matmul-coop-scale.ts).
 *
 * - The exponent choice and output split on their own (no GPU), and an emulation of the scaled
 *   f16 dot product showing what the scaling buys at magnitudes 1e-7 and 3e5.
 * - The max-abs dispatch and the WGSL exponent helpers on any WebGPU device (lavapipe in CI): they
 *   need no cooperative matrices.
 * - The scaled tensor-core matmul through the webgpu backend (`tensorCores: true`) against the cpu
 *   backend's f32 matmul and a float64 emulation of the scaled rounding, at awkward sizes with tiny
 *   (1e-7), large (1e4, 3e5), zero and NaN/inf operands. These need the cooperative-matrix feature
 *   (our library, ZEROMOE_WGPU=coop, on a GPU that offers it); elsewhere they skip, naming why.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Buf, MatmulSpec } from "../../src/backend.ts";
import { CpuBackend } from "../../src/cpu/index.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { randomF64 } from "../../src/testing.ts";
import { bf16FromF32, bf16ToNumber, f16FromF32, f16ToNumber } from "../../src/numerics/index.ts";
import { assembleWgsl } from "../../src/webgpu/kernel.ts";
import { readBack, uploadPadded } from "../ffi/setup.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { COOP_MIN_BLOCKS, coopBlocks, coopMatmulLaunches } from "../../src/wgsl/matmul-coop-launch.ts";
import {
  COOP_AMAX_PARTIALS,
  COOP_AMAX_WORDS,
  COOP_SCALE_MAX_EXP,
  COOP_SCALE_WGSL,
  coopAbsMaxLaunch,
  coopOutputExponents,
  coopScaleExponent,
  coopScaleExponentOf,
  finiteAbsBits,
} from "../../src/wgsl/matmul-coop-scale.ts";
import { coopKernelKey, matmulCoopWGSL } from "../../src/wgsl/matmul-coop-wgsl.ts";
import { coopSupport } from "../../src/wgsl/matmul-coop.ts";

/** xorshift32 uniform in [-1, 1), never exactly 0. */
function uniform(n: number, seed: number): Float64Array {
  return randomF64(n, seed).map((x) => x || 0.5);
}

const f32 = Math.fround;
/** Round to f16 (nearest even, overflow to ±inf), as the tensor-core staging does. */
const h = (x: number) => f16ToNumber(f16FromF32(x));
/** The staged value of x in an operand with exponent k, back in x's units. */
const hs = (x: number, k: number) => h(f32(x * 2 ** k)) * 2 ** -k;

describe("exponent choice (no GPU)", () => {
  test("max·2^k lands in [2^14, 2^15) for normal maxima from 1e-37 to 3e38", () => {
    const cases: [number, number][] = [[1, 14], [1.37, 14], [0.5, 15], [1e-7, 38], [1e4, 1], [65504, -1], [32768, -1], [32767, 0], [f32(3.4e38), -113]];
    for (const [m, k] of cases) expect(coopScaleExponent(finiteAbsBits(m))).toBe(k);
    for (const x of uniform(2000, 77)) {
      const m = f32(Math.abs(x) * 10 ** Math.round(x * 37)); // magnitudes 1e-37 .. 1e37
      if (m < 2 ** -112) continue; // below this the exponent is clamped (next test)
      const k = coopScaleExponent(finiteAbsBits(m));
      const scaled = m * 2 ** k;
      expect(scaled).toBeGreaterThanOrEqual(2 ** 14);
      expect(scaled).toBeLessThan(2 ** 15);
      expect(Number.isFinite(h(scaled))).toBe(true); // never rounds to f16 inf
    }
  });

  test("zero, f32-subnormal and tiny maxima take the clamp exponent; k stays in [-113, 126]", () => {
    expect(coopScaleExponent(0)).toBe(COOP_SCALE_MAX_EXP);
    expect(coopScaleExponent(1)).toBe(COOP_SCALE_MAX_EXP); // smallest subnormal
    expect(coopScaleExponent(0x007fffff)).toBe(COOP_SCALE_MAX_EXP); // largest subnormal
    expect(coopScaleExponent(finiteAbsBits(2 ** -113))).toBe(COOP_SCALE_MAX_EXP);
    expect(coopScaleExponent(finiteAbsBits(2 ** -112))).toBe(COOP_SCALE_MAX_EXP);
    expect(coopScaleExponent(finiteAbsBits(2 ** -111))).toBe(125);
    expect(coopScaleExponent(0x7f7fffff)).toBe(-113);
  });

  test("NaN and ±inf are left out of the maximum; the sign is ignored", () => {
    expect(finiteAbsBits(NaN)).toBe(0);
    expect(finiteAbsBits(Infinity)).toBe(0);
    expect(finiteAbsBits(-Infinity)).toBe(0);
    expect(finiteAbsBits(-3)).toBe(finiteAbsBits(3));
    expect(finiteAbsBits(1e39)).toBe(0); // overflows f32
    expect(coopScaleExponentOf([NaN, -2e-6, Infinity, 1e-6])).toBe(coopScaleExponent(finiteAbsBits(2e-6)));
    expect(coopScaleExponentOf([])).toBe(COOP_SCALE_MAX_EXP);
  });

  test("bad bit patterns are refused", () => {
    expect(() => coopScaleExponent(0x7f800000)).toThrow(/finite non-negative f32/);
    expect(() => coopScaleExponent(-1)).toThrow(/maxBits/);
    expect(() => coopScaleExponent(1.5)).toThrow(/maxBits/);
  });

  test("output exponents: two normal-range halves summing to -(kA+kB)", () => {
    for (const kA of [-113, -50, -1, 0, 1, 38, 125, 126]) {
      for (const kB of [-113, -7, 0, 14, 77, 126]) {
        const [e1, e2] = coopOutputExponents(kA, kB);
        expect(e1 + e2).toBe(-(kA + kB));
        for (const e of [e1, e2]) {
          expect(e).toBeGreaterThanOrEqual(-126);
          expect(e).toBeLessThanOrEqual(127);
        }
      }
    }
  });

  test("emulated f16 dot products: scaling keeps f16 precision at 1e-7 and 3e5, unscaled does not", () => {
    const K = 257;
    // [magnitude of a, of b, whether unscaled f16 fails]: 1e4 fits f16 (max 65504) either way
    for (const [ma, mb, plainFails] of [[1e-7, 1, true], [1, 1e-7, true], [1e-7, 1e-7, true], [3e5, 1e-3, true], [1e4, 1e4, false]] as const) {
      const a = Array.from(uniform(K, 5), (x) => f32(x * ma)), b = Array.from(uniform(K, 6), (x) => f32(x * mb));
      const kA = coopScaleExponentOf(a), kB = coopScaleExponentOf(b);
      let exact = 0, scaled = 0, plain = 0, mag = 0;
      for (let k = 0; k < K; k++) {
        exact += a[k]! * b[k]!;
        mag += Math.abs(a[k]! * b[k]!);
        scaled += hs(a[k]!, kA) * hs(b[k]!, kB);
        plain += h(a[k]!) * h(b[k]!);
      }
      expect(Math.abs(scaled - exact) / mag).toBeLessThan(2 ** -10); // two f16 roundings per product
      // without scaling 1e-7 falls to f16's subnormals (or flushes) and 3e5 overflows to inf
      expect(!Number.isFinite(plain) || Math.abs(plain - exact) / mag > 1e-2).toBe(plainFails);
    }
  });
});

// ---- GPU: the max-abs dispatch and the WGSL helpers (any adapter) --------------------------------

const gpu = createGPU();
const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
let device: GPUDevice | null = null;
beforeAll(async () => {
  if (adapter) device = await adapter.requestDevice();
});
afterAll(() => device?.destroy());

const upload = (data: ArrayBufferView, usage: number): GPUBuffer => uploadPadded(device!, data, usage | GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC);
const readU32 = async (buf: GPUBuffer, n: number): Promise<Uint32Array> => new Uint32Array(await readBack(device!, buf, 4 * n));

/** Run one backend Launch on raw buffers through the backend's WGSL assembler. */
function runLaunch(l: ReturnType<typeof coopAbsMaxLaunch>, gpuOf: Map<number, GPUBuffer>): void {
  const asm = assembleWgsl(l.kernel, l.bufs.map((b) => b.id));
  const pipe = device!.createComputePipeline({ layout: "auto", compute: { module: device!.createShaderModule({ code: asm.source }), entryPoint: "main" } });
  const params = new Uint32Array(Math.ceil(l.params.length / 4) * 4);
  params.set(l.params);
  const ub = upload(params, GPUBufferUsage.UNIFORM);
  const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: ub } }];
  asm.slotOf.forEach((slot, i) => {
    if (!entries.some((e) => e.binding === slot + 1)) entries.push({ binding: slot + 1, resource: { buffer: gpuOf.get(l.bufs[i]!.id)! } });
  });
  const enc = device!.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipe);
  pass.setBindGroup(0, device!.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries }));
  const w = l.workgroups as readonly [number, number, number];
  pass.dispatchWorkgroups(w[0], w[1], w[2]);
  pass.end();
  device!.queue.submit([enc.finish()]);
}

const fakeBuf = (id: number, dtype: Buf["dtype"], length: number): Buf => ({ id, dtype, length, tag: "other" });
const noAdapter = adapter ? "" : "no WebGPU adapter";

describe("max-abs dispatch (any WebGPU device)", () => {
  interface AmaxCase {
    name: string;
    batch: number;
    aOff: number;
    aSize: number;
    strideA: number;
    bOff: number;
    bSize: number;
    strideB: number;
    /** values of A and B (in operand elements) and of the gaps (never read) */
    fillA: (i: number) => number;
    fillB: (i: number) => number;
    sameBuffer?: boolean;
  }
  const r = uniform(1 << 20, 9);
  const CASES: AmaxCase[] = [
    { name: "1 element each", batch: 1, aOff: 0, aSize: 1, strideA: 1, bOff: 0, bSize: 1, strideB: 1, fillA: () => -3e-7, fillB: () => 5 },
    { name: "prime sizes, offsets, tiny and large", batch: 1, aOff: 7, aSize: 65537 * 3 + 11, strideA: 0, bOff: 3, bSize: 1009, strideB: 0, fillA: (i) => r[i % r.length]! * 1e-7, fillB: (i) => r[(i * 7) % r.length]! * 3e5 },
    { name: "batch 3 with gaps holding huge values and NaN", batch: 3, aOff: 5, aSize: 37 * 43, strideA: 37 * 43 + 13, bOff: 2, bSize: 43 * 41, strideB: 43 * 41 + 9, fillA: (i) => r[i]! * 2, fillB: (i) => r[i + 99]! * 1e-3 },
    { name: "NaN and inf are ignored", batch: 2, aOff: 0, aSize: 5000, strideA: 5000, bOff: 0, bSize: 300, strideB: 301, fillA: (i) => (i === 17 ? NaN : i === 4999 ? -Infinity : r[i]!), fillB: (i) => (i % 50 === 0 ? Infinity : r[i]! * 4) },
    { name: "past the unrolled steps: 2·8·65536 + 7 elements, the largest in the tail and in a step's last load", batch: 1, aOff: 1, aSize: 2 * 8 * 65536 + 7, strideA: 0, bOff: 0, bSize: 8 * 65536 + 3, strideB: 0, fillA: (i) => (i === 2 * 8 * 65536 + 5 ? -9.5 : r[i % r.length]!), fillB: (i) => (i === 7 * 65536 + 11 ? 6.25 : r[(i * 3) % r.length]!) },
    { name: "all zeros (and a subnormal)", batch: 1, aOff: 0, aSize: 777, strideA: 777, bOff: 0, bSize: 555, strideB: 555, fillA: () => 0, fillB: (i) => (i === 3 ? 1e-40 : -0) },
    { name: "A and B views of one buffer", batch: 1, aOff: 0, aSize: 3001, strideA: 3001, bOff: 3001, bSize: 2999, strideB: 2999, fillA: (i) => r[i]! * 7, fillB: (i) => r[i]! * 0.25, sameBuffer: true },
  ];
  for (const c of CASES) {
    test.skipIf(!!noAdapter)(c.name, async () => {
      const nA = c.aOff + (c.batch - 1) * c.strideA + c.aSize + 3, nB = c.bOff + (c.batch - 1) * c.strideB + c.bSize + 3;
      const gap = (i: number) => (i % 2 ? NaN : 1e30);
      const a = Float32Array.from({ length: nA }, (_, i) => gap(i)), b = Float32Array.from({ length: nB }, (_, i) => gap(i));
      const valsA: number[] = [], valsB: number[] = [];
      for (let bi = 0; bi < c.batch; bi++) {
        for (let e = 0; e < c.aSize; e++) valsA.push((a[c.aOff + bi * c.strideA + e] = c.fillA(bi * c.aSize + e)));
        for (let e = 0; e < c.bSize; e++) valsB.push((b[c.bOff + bi * c.strideB + e] = c.fillB(bi * c.bSize + e)));
      }
      let A: GPUBuffer, B: GPUBuffer, bufA: Buf, bufB: Buf;
      if (c.sameBuffer) {
        // B's region follows A's in one buffer: a[0..aSize) then b at bOff = aSize
        const one = new Float32Array(c.aSize + c.bSize);
        one.set(a.subarray(0, c.aSize));
        one.set(b.subarray(c.bOff, c.bOff + c.bSize), c.aSize);
        A = B = upload(one, 0);
        bufA = bufB = fakeBuf(1, "f32", one.length);
      } else {
        A = upload(a, 0);
        B = upload(b, 0);
        bufA = fakeBuf(1, "f32", nA);
        bufB = fakeBuf(2, "f32", nB);
      }
      const amax = upload(new Uint32Array(COOP_AMAX_WORDS).fill(0xdeadbeef), 0);
      const bufM = fakeBuf(3, "u32", COOP_AMAX_WORDS);
      runLaunch(coopAbsMaxLaunch(bufA, c.aOff, c.aSize, c.strideA, bufB, c.bOff, c.bSize, c.strideB, c.batch, bufM), new Map([[1, A], [2, B], [3, amax]]));
      const got = await readU32(amax, COOP_AMAX_WORDS);
      const maxOf = (xs: Uint32Array) => xs.reduce((m, x) => Math.max(m, x), 0);
      const wantA = valsA.reduce((m, x) => Math.max(m, finiteAbsBits(x)), 0), wantB = valsB.reduce((m, x) => Math.max(m, finiteAbsBits(x)), 0);
      expect(maxOf(got.subarray(0, COOP_AMAX_PARTIALS))).toBe(wantA);
      expect(maxOf(got.subarray(COOP_AMAX_PARTIALS))).toBe(wantB);
      for (const x of got) expect(x).toBeLessThan(0x7f800000); // every partial written, finite
      for (const x of new Set([A, B, amax])) x.destroy();
    }, 300_000);
  }

  // 16-bit operands are read as 32-bit words, both halves folded: odd offsets, odd sizes and batch
  // gaps whose halves share a word with an operand's first or last element (holding 60000/NaN, or
  // bf16 1e30, that must not count), sizes past the unrolled steps
  const halfCases: { name: string; da: "bf16" | "f16"; db: "bf16" | "f16"; batch: number; aOff: number; aSize: number; strideA: number; bOff: number; bSize: number; strideB: number }[] = [
    { name: "bf16 × f16, odd offsets and sizes, batch 3 with odd gaps", da: "bf16", db: "f16", batch: 3, aOff: 3, aSize: 1001, strideA: 1004, bOff: 1, bSize: 37, strideB: 40 },
    { name: "f16 × bf16 past the unrolled steps (2·2·8·65536 + 5 halves)", da: "f16", db: "bf16", batch: 1, aOff: 1, aSize: 2 * 2 * 8 * 65536 + 5, strideA: 0, bOff: 2, bSize: 2 * 8 * 65536 + 1, strideB: 0 },
    { name: "one element at an odd offset", da: "bf16", db: "bf16", batch: 1, aOff: 5, aSize: 1, strideA: 1, bOff: 0, bSize: 1, strideB: 1 },
  ];
  for (const c of halfCases) {
    test.skipIf(!!noAdapter)(`16-bit: ${c.name}`, async () => {
      const bitsOf = (d: "bf16" | "f16", x: number) => (d === "bf16" ? bf16FromF32(x) : f16FromF32(x));
      const valueOf = (d: "bf16" | "f16", b: number) => (d === "bf16" ? bf16ToNumber(b) : f16ToNumber(b));
      const fill = (d: "bf16" | "f16", off: number, size: number, stride: number, seed: number) => {
        const n = off + (c.batch - 1) * stride + size + 3;
        const gapBits = [bitsOf(d, d === "bf16" ? 1e30 : 60000), d === "bf16" ? 0x7fc0 : 0x7e00];
        const data = Uint16Array.from({ length: n }, (_, i) => gapBits[i % 2]!);
        const u = uniform(size * c.batch, seed);
        let want = 0;
        for (let bi = 0; bi < c.batch; bi++) {
          for (let e = 0; e < size; e++) {
            const at = bi * size + e;
            // the largest: at the end (the tail loop), or where the first unrolled step's last load reads (word 7·65536 + 5)
            const x = e === 2 * (7 * 65536 + 5) - 1 ? -11.5 : e === size - 1 && bi === c.batch - 1 ? -7.75 : u[at]! * (d === "bf16" ? 1e-20 : 3);
            data[off + bi * stride + e] = bitsOf(d, x);
            want = Math.max(want, finiteAbsBits(valueOf(d, data[off + bi * stride + e]!)));
          }
        }
        return { data, want };
      };
      const A = fill(c.da, c.aOff, c.aSize, c.strideA, 31), B = fill(c.db, c.bOff, c.bSize, c.strideB, 32);
      const gA = upload(A.data, 0), gB = upload(B.data, 0);
      const amax = upload(new Uint32Array(COOP_AMAX_WORDS).fill(0xdeadbeef), 0);
      runLaunch(coopAbsMaxLaunch(fakeBuf(1, c.da, A.data.length), c.aOff, c.aSize, c.strideA, fakeBuf(2, c.db, B.data.length), c.bOff, c.bSize, c.strideB, c.batch, fakeBuf(3, "u32", COOP_AMAX_WORDS)), new Map([[1, gA], [2, gB], [3, amax]]));
      const got = await readU32(amax, COOP_AMAX_WORDS);
      const maxOf = (xs: Uint32Array) => xs.reduce((m, x) => Math.max(m, x), 0);
      expect(maxOf(got.subarray(0, COOP_AMAX_PARTIALS))).toBe(A.want);
      expect(maxOf(got.subarray(COOP_AMAX_PARTIALS))).toBe(B.want);
      for (const x of got) expect(x).toBeLessThan(0x7f800000);
      for (const x of [gA, gB, amax]) x.destroy();
    }, 300_000);
  }

  test("argument checks name what was expected", () => {
    expect(() => coopAbsMaxLaunch(fakeBuf(1, "i32", 4), 0, 4, 4, fakeBuf(2, "f32", 4), 0, 4, 4, 1, fakeBuf(3, "u32", COOP_AMAX_WORDS))).toThrow(/must be f32, f16 or bf16/);
    expect(() => coopAbsMaxLaunch(fakeBuf(1, "f32", 4), 0, 4, 4, fakeBuf(2, "f32", 4), 0, 4, 4, 1, fakeBuf(3, "u32", 8))).toThrow(/at least 512/);
    expect(() => coopMatmulLaunches(fakeBuf(1, "f32", 4), 0, fakeBuf(2, "f32", 4), 0, fakeBuf(4, "f32", 4), 0, { M: 2, N: 2, K: 2 }, () => fakeBuf(3, "f32", 512))).toThrow(/partial maxima|amax must be a u32/);
    expect(() => coopMatmulLaunches(fakeBuf(1, "i32", 4), 0, fakeBuf(2, "f32", 4), 0, fakeBuf(4, "f32", 4), 0, { M: 2, N: 2, K: 2 }, () => fakeBuf(3, "u32", 512))).toThrow(/a, b must be f32, f16 or bf16 and out f32/);
  });

  test.skipIf(!!noAdapter)("WGSL coop_scale_exp / coop_pow2 agree with the host exponent math", async () => {
    const bits = [0, 1, 0x007fffff, 0x00800000, 0x0c000000, finiteAbsBits(1e-7), finiteAbsBits(1), finiteAbsBits(1.37), finiteAbsBits(1e4), finiteAbsBits(65504), 0x7f7fffff];
    for (const x of uniform(200, 3)) bits.push(finiteAbsBits(Math.abs(x) * 10 ** Math.round(x * 38)));
    const n = bits.length;
    const code = `${COOP_SCALE_WGSL}
@group(0) @binding(0) var<storage, read> inp: array<u32>;
@group(0) @binding(1) var<storage, read_write> res: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x;
  if (i >= ${n}u) { return; }
  let ka = coop_scale_exp(inp[i]);
  let kb = coop_scale_exp(inp[${n - 1}u - i]);
  let h = (ka + kb) / 2;
  res[4u * i] = bitcast<u32>(ka);
  res[4u * i + 1u] = bitcast<u32>(coop_pow2(ka));
  res[4u * i + 2u] = bitcast<u32>(coop_pow2(-h));
  res[4u * i + 3u] = bitcast<u32>(coop_pow2(h - ka - kb));
}`;
    const inp = upload(Uint32Array.from(bits), 0), res = upload(new Uint32Array(4 * n), 0);
    const pipe = device!.createComputePipeline({ layout: "auto", compute: { module: device!.createShaderModule({ code }), entryPoint: "main" } });
    const enc = device!.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(0, device!.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: inp } }, { binding: 1, resource: { buffer: res } }] }));
    pass.dispatchWorkgroups(Math.ceil(n / 64));
    pass.end();
    device!.queue.submit([enc.finish()]);
    const got = await readU32(res, 4 * n);
    const asF32 = (u: number) => new Float32Array(Uint32Array.of(u).buffer)[0]!;
    for (let i = 0; i < n; i++) {
      const ka = coopScaleExponent(bits[i]!), kb = coopScaleExponent(bits[n - 1 - i]!);
      const [e1, e2] = coopOutputExponents(ka, kb);
      expect(got[4 * i]! | 0).toBe(ka);
      expect(asF32(got[4 * i + 1]!)).toBe(2 ** ka);
      expect(asF32(got[4 * i + 2]!)).toBe(2 ** e1);
      expect(asF32(got[4 * i + 3]!)).toBe(2 ** e2);
    }
    inp.destroy();
    res.destroy();
  }, 300_000);
});

// ---- the scaled tensor-core matmul (needs cooperative matrices) ----------------------------------

const support = adapter ? coopSupport(adapter) : { ok: false, reason: "no adapter", configs: null };
const skipReason = support.ok ? "" : support.reason;

test("scaled kernel WGSL: its own key, the amax binding, prologue and scaled store", () => {
  const o = { input: "f32" as const, transA: false, transB: true, accumulate: true, scaled: true };
  expect(coopKernelKey(o)).toBe("matmul_coop_f32_nt_acc_scaled");
  const w = matmulCoopWGSL(o);
  expect(w).toContain("@group(0) @binding(4) var<storage, read> amax: array<u32>;");
  expect(w).toContain("coop_scale_exp(bitcast<u32>(so[0]))");
  expect(w).toContain("* scale_a)");
  expect(w).toContain("* scale_b)");
  expect(w).toContain("* out_s1 * out_s2");
  const k = matmulCoopWGSL({ ...o, mode: "kernel" });
  expect(k).toContain("b_amax[");
  expect(k).not.toMatch(/[^_]amax\[/);
  expect(() => matmulCoopWGSL({ ...o, input: "f16" })).toThrow(/scaled needs input f32/);
  // the unscaled kernel is unchanged by the option's existence
  expect(matmulCoopWGSL({ ...o, scaled: false })).not.toContain("scale_a");
});

describe("scaled tensor-core matmul through the webgpu backend", () => {
  test("support check: runs here, or the reason is named", () => {
    if (!support.ok) console.log(`matmul-coop-scale: tensor-core tests skipped: ${skipReason}`);
    expect(support.ok || skipReason.length > 0).toBe(true);
  });

  interface Case {
    name: string;
    spec: MatmulSpec;
    magA: number;
    magB: number;
    /** place NaN / ±inf / zero operands */
    special?: "nan-inf" | "zero-a";
    /** unscaled f16 rounding would miss the f32 result by more than f16 precision */
    plainFails?: boolean;
  }
  const CASES: Case[] = [
    { name: "tiny A (1e-7), NN", spec: { M: 1290, N: 1160, K: 37 }, magA: 1e-7, magB: 1, plainFails: true },
    { name: "tiny both (1e-7 x 1e-7), NT accumulate", spec: { M: 1161, N: 1289, K: 45, transB: true, accumulate: true }, magA: 1e-7, magB: 1e-7, plainFails: true },
    { name: "large A (3e5, beyond f16), TN", spec: { M: 1031, N: 1300, K: 29, transA: true }, magA: 3e5, magB: 1e-3, plainFails: true },
    { name: "large both (1e4), TT batch 4", spec: { M: 640, N: 700, K: 33, transA: true, transB: true, batch: 4 }, magA: 1e4, magB: 1e4 },
    { name: "NaN and inf propagate as in f32", spec: { M: 1290, N: 1163, K: 31 }, magA: 1, magB: 2e-6, special: "nan-inf", plainFails: true },
    { name: "zero A leaves out unchanged (accumulate)", spec: { M: 1160, N: 1290, K: 41, accumulate: true }, magA: 0, magB: 5, special: "zero-a" },
  ];
  for (const c of CASES) {
    test.skipIf(!support.ok)(c.name, async () => {
      const spec = c.spec;
      expect(coopBlocks(spec)).toBeGreaterThanOrEqual(COOP_MIN_BLOCKS);
      const be = await WebGpuBackend.create(createGPU(), { tensorCores: true });
      const cpu = new CpuBackend();
      try {
        const batch = spec.batch ?? 1;
        const { M, N, K } = spec;
        const a = Float32Array.from(uniform(batch * M * K, 3 + M), (x) => x * c.magA);
        const b = Float32Array.from(uniform(batch * K * N, 4 + N), (x) => x * c.magB);
        const o0 = Float32Array.from(uniform(batch * M * N, 5), (x) => x * (c.magA || 1) * c.magB * K);
        const ai = (bi: number, m: number, k: number) => bi * M * K + (spec.transA ? k * M + m : m * K + k);
        const bi_ = (bi: number, k: number, n: number) => bi * K * N + (spec.transB ? n * K + k : k * N + n);
        const nanRow = 7, infRow = 11, infK = 3, zeroN = 5;
        if (c.special === "nan-inf") {
          a[ai(0, nanRow, 0)] = NaN;
          a[ai(0, infRow, infK)] = Infinity;
          b[bi_(0, infK, zeroN)] = 0; // inf·0 = NaN in that one output
        }
        const run = async (be2: WebGpuBackend | CpuBackend) => {
          const A = be2.alloc("f32", a.length, "other"), B = be2.alloc("f32", b.length, "other"), O = be2.alloc("f32", o0.length, "other");
          be2.write({ buf: A, off: 0 }, a);
          be2.write({ buf: B, off: 0 }, b);
          be2.write({ buf: O, off: 0 }, o0);
          be2.matmul({ buf: A, off: 0 }, { buf: B, off: 0 }, { buf: O, off: 0 }, spec);
          return (await be2.read({ buf: O, off: 0 }, o0.length)) as Float32Array;
        };
        const got = await run(be);
        const ref32 = await run(cpu);
        const kA = coopScaleExponentOf(a), kB = coopScaleExponentOf(b);
        let worstEmu = 0, worst32 = 0, worstPlain = 0, checked = 0;
        for (let s = 0; s < 400; s++) {
          const bi = s % batch;
          let m = (s * 7919) % M, n = (s * 104729 + (s % 3 === 0 ? N - 1 : 0)) % N;
          if (c.special === "nan-inf" && s < 4) [m, n] = [[nanRow, 9], [infRow, 8], [infRow, zeroN], [nanRow, zeroN]][s]!;
          let emu = 0, plain = 0, mag = 0;
          for (let k = 0; k < K; k++) {
            const av = a[ai(bi, m, k)]!, bv = b[bi_(bi, k, n)]!;
            emu += hs(av, kA) * hs(bv, kB);
            plain += h(av) * h(bv);
            mag += Math.abs(av * bv);
          }
          const o = bi * M * N + m * N + n;
          const base = spec.accumulate ? o0[o]! : 0;
          const want = emu + base;
          if (!Number.isFinite(want)) {
            // NaN where f32 gives NaN, ±inf where it gives ±inf
            if (Number.isNaN(want)) expect(got[o]).toBeNaN();
            else expect(got[o]).toBe(want);
            expect(Object.is(ref32[o], got[o]) || (Number.isNaN(ref32[o]!) && Number.isNaN(got[o]!))).toBe(true);
            continue;
          }
          checked++;
          const den = mag + Math.abs(base) || 1;
          worstEmu = Math.max(worstEmu, Math.abs(got[o]! - want) / den);
          worst32 = Math.max(worst32, Math.abs(got[o]! - ref32[o]!) / den);
          worstPlain = Math.max(worstPlain, Number.isFinite(plain) ? Math.abs(plain + base - ref32[o]!) / den : Infinity);
        }
        expect(checked).toBeGreaterThan(300);
        expect(worstEmu).toBeLessThan(1e-5); // exactly the scaled f16 rounding, f32-accumulated
        expect(worst32).toBeLessThan(2e-3); // within f16 precision of the cpu backend's f32 result
        if (c.special === "zero-a") {
          for (let i = 0; i < got.length; i += 97) expect(got[i]).toBe(o0[i]!);
        }
        // the emulation shows unscaled f16 could not have done it (tiny: subnormal; large: inf)
        if (c.plainFails) expect(worstPlain).toBeGreaterThan(2e-3);
      } finally {
        be.destroy();
      }
    }, 300_000);
  }
});
