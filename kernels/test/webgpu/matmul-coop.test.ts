/**
 * The tensor-core matmul (kernels/src/wgsl/matmul-coop*.ts) against a float64 reference of the same
 * f16-rounded inputs, at awkward sizes (1×1×1, primes, sizes that straddle the 128×128×32 block),
 * all four transpose layouts, f16 and f32 inputs, accumulate, element offsets and a batch with
 * strides. It needs the cooperative-matrix feature, which only our library (ZEROMOE_WGPU=coop)
 * enables and lavapipe does not offer: there the GPU tests skip, naming the reason; they ran on
 * the H200 (docs/performance.md, "Tensor cores (cooperative matrix)").
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createGPU } from "../../src/ffi/index.ts";
import { f16FromF32, f16ToNumber } from "../../src/numerics/index.ts";
import { randomF64 } from "../../src/testing.ts";
import { COOP_TILE, coopKernelKey, coopWorkgroupBytes, matmulCoopWGSL } from "../../src/wgsl/matmul-coop-wgsl.ts";
import { COOP_FEATURES, CoopMatmul, coopDirectEpilogueOk, coopSupport, type CoopMatmulCall } from "../../src/wgsl/matmul-coop.ts";
import { COOP_DEFAULT_TILE, coopTileName, parseCoopTile } from "../../src/wgsl/matmul-coop-tile.ts";
import { coopSplitKChunks } from "../../src/wgsl/matmul-coop-split-k.ts";
import { COOP_MIN_BLOCKS, coopBlocks } from "../../src/wgsl/matmul-coop-launch.ts";
import { uploadPadded } from "../ffi/setup.ts";
import type { MatmulSpec } from "../../src/backend.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";

/** n seeded f16 bit patterns of values uniform in [-1, 1), a drawn 0 replaced by 0.25. */
function rand16(n: number, seed: number): Uint16Array {
  return Uint16Array.from(randomF64(n, seed), (x) => f16FromF32(x || 0.25));
}

test("every variant fits WebGPU's 48 KiB-class workgroup memory and names its choices", () => {
  for (const transA of [false, true]) for (const transB of [false, true]) expect(coopWorkgroupBytes({ transA, transB })).toBeLessThanOrEqual(49152);
  const keys = new Set<string>();
  for (const input of ["f16", "f32"] as const) for (const transA of [false, true]) for (const transB of [false, true]) for (const accumulate of [false, true]) for (const vec of [1, 4] as const) {
    const o = { input, transA, transB, accumulate, vec };
    keys.add(coopKernelKey(o));
    const w = matmulCoopWGSL(o);
    expect(w.startsWith("enable f16;\nenable wgpu_cooperative_matrix;")).toBe(true);
    expect(w).toContain(vec === 4 ? `array<vec4<${input}>>` : `array<${input}>`);
  }
  expect(keys.size).toBe(32);
});

// Decided at load time, so unsupported runs report the GPU tests as skipped (not as passed).
const adapter = await createGPU().requestAdapter({ powerPreference: "high-performance" });
const support = adapter ? coopSupport(adapter) : { ok: false, reason: "no adapter", configs: null };
const skipReason = support.ok ? "" : support.reason;
let device: GPUDevice | null = null;
let coop: CoopMatmul | null = null;
beforeAll(async () => {
  if (!adapter || !support.ok) return;
  device = await adapter.requestDevice({
    requiredFeatures: [...COOP_FEATURES],
    requiredLimits: {
      maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
      // the 16-subgroup tiles need 512 invocations (WebGPU's default limit is 256)
      maxComputeInvocationsPerWorkgroup: adapter.limits.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: adapter.limits.maxComputeWorkgroupSizeX,
    },
  });
  coop = new CoopMatmul(device);
});
afterAll(() => device?.destroy());

test("support check: the tensor-core matmul runs here, or the reason is named", () => {
  if (!support.ok) console.log(`matmul-coop: GPU tests skipped: ${skipReason}`);
  expect(support.ok || skipReason.length > 0).toBe(true);
});

interface Case extends CoopMatmulCall {
  input: "f16" | "f32";
}

const CASES: Case[] = [
  { M: 1, N: 1, K: 1, input: "f16" },
  { M: 129, N: 67, K: 37, input: "f16" },
  { M: 129, N: 67, K: 37, input: "f16", transA: true },
  { M: 67, N: 131, K: 45, input: "f16", transB: true },
  { M: 131, N: 129, K: 33, input: "f16", transA: true, transB: true },
  { M: 257, N: 139, K: 97, input: "f32", transB: true },
  { M: 97, N: 61, K: 259, input: "f32", transA: true, accumulate: true },
  { M: 128, N: 256, K: 96, input: "f16", vec: 4 },
  { M: 132, N: 68, K: 36, input: "f16", transA: true, vec: 4 },
  { M: 68, N: 132, K: 44, input: "f32", transB: true, vec: 4 },
  { M: 36, N: 44, K: 52, input: "f16", transA: true, transB: true, vec: 4, accumulate: true },
  { M: 40, N: 44, K: 48, input: "f32", vec: 4, batch: 2, aOff: 4, bOff: 8, outOff: 3, strideA: 40 * 48 + 4, strideB: 48 * 44 + 12, strideOut: 40 * 44 + 1 },
  { M: 64, N: 64, K: 64, input: "f16", vec: 1 },
  { M: 37, N: 41, K: 43, input: "f16", batch: 3, aOff: 8, bOff: 4, outOff: 5, strideA: 37 * 43 + 3, strideB: 43 * 41 + 7, strideOut: 37 * 41 + 2, accumulate: true },
];

/** Run one case on `coop` (real or emulated) and compare with the float64 reference of the same
 * f16-rounded inputs; also checks that nothing outside the outputs is written. With `splitK` the
 * call goes through CoopMatmul.prepareSplitK (transA, not transB, batch 1 only). */
async function runCase(dev: GPUDevice, coop: CoopMatmul, c: Case, splitK = 1): Promise<void> {
  const batch = c.batch ?? 1;
  const sA = c.strideA ?? c.M * c.K, sB = c.strideB ?? c.K * c.N, sO = c.strideOut ?? c.M * c.N;
  const aOff = c.aOff ?? 0, bOff = c.bOff ?? 0, oOff = c.outOff ?? 0;
  const a16 = rand16(aOff + batch * sA, 11 + c.M), b16 = rand16(bOff + batch * sB, 23 + c.N);
  const o0 = Float32Array.from(rand16(oOff + batch * sO, 5), (x) => f16ToNumber(x));
  const av = (bi: number, m: number, k: number) => f16ToNumber(a16[aOff + bi * sA + (c.transA ? k * c.M + m : m * c.K + k)]!);
  const bv = (bi: number, k: number, n: number) => f16ToNumber(b16[bOff + bi * sB + (c.transB ? n * c.K + k : k * c.N + n)]!);
  const upload = (data: ArrayBufferView, usage: number) => uploadPadded(dev, data, usage);
  const aData = c.input === "f16" ? a16 : Float32Array.from(a16, (x) => f16ToNumber(x));
  const bData = c.input === "f16" ? b16 : Float32Array.from(b16, (x) => f16ToNumber(x));
  const A = upload(aData, GPUBufferUsage.STORAGE), B = upload(bData, GPUBufferUsage.STORAGE);
  const out = upload(o0, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC);
  const read = dev.createBuffer({ size: o0.byteLength, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const prepared = splitK > 1 ? coop.prepareSplitK(c, splitK, c.input, A, B, out) : (() => {
    const p = coop.prepare(c, c.input, A, B, out);
    return { dispatches: [p], buffers: [p.params] };
  })();
  const enc = dev.createCommandEncoder();
  const pass = enc.beginComputePass();
  for (const d of prepared.dispatches) {
    pass.setPipeline(d.pipeline);
    pass.setBindGroup(0, d.bindGroup);
    pass.dispatchWorkgroups(...d.workgroups);
  }
  pass.end();
  enc.copyBufferToBuffer(out, 0, read, 0, o0.byteLength);
  dev.queue.submit([enc.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const got = new Float32Array(read.getMappedRange().slice(0));
  read.unmap();
  let worst = 0;
  const touched = new Uint8Array(got.length);
  for (let bi = 0; bi < batch; bi++) {
    for (let m = 0; m < c.M; m++) {
      for (let n = 0; n < c.N; n++) {
        let ref = 0, mag = 0;
        for (let k = 0; k < c.K; k++) {
          const prod = av(bi, m, k) * bv(bi, k, n);
          ref += prod;
          mag += Math.abs(prod);
        }
        const o = oOff + bi * sO + m * c.N + n;
        touched[o] = 1;
        if (c.accumulate) ref += o0[o]!;
        worst = Math.max(worst, Math.abs(got[o]! - ref) / (mag + Math.abs(c.accumulate ? o0[o]! : 0) || 1));
      }
    }
  }
  // f16 products are exact in f32: only the f32 accumulation order differs from float64
  expect(worst).toBeLessThan(1e-5);
  // nothing outside the outputs is written (padding, offsets, batch gaps)
  for (let i = 0; i < got.length; i++) if (!touched[i]) expect(got[i]).toBe(o0[i]!);
  for (const x of [A, B, out, read, ...prepared.buffers]) x.destroy();
}

const caseName = (c: Case) => `${c.input}${c.vec === 4 ? " vec4" : ""} ${c.M}x${c.N}x${c.K} ${c.transA ? "T" : "N"}${c.transB ? "T" : "N"}${c.accumulate ? " accumulate" : ""}${c.batch ? ` batch ${c.batch} with offsets` : ""}${c.epilogue ? ` ${c.epilogue}` : ""}`;

describe("tensor-core matmul vs float64 reference", () => {
  for (const epilogue of ["scratch", "auto"] as const) {
    for (const c0 of CASES) {
      const c = { ...c0, epilogue };
      test.skipIf(!support.ok)(`${coopTileName(COOP_DEFAULT_TILE)} ${caseName(c)}`, async () => {
        if (!device || !coop) throw new Error("device not created");
        await runCase(device, coop, c);
      }, 300_000);
    }
  }
});

/** The bench's fastest blocks (16 subgroups of 2×4 fragments, one stage, direct epilogue where
 * allowed) with each guard of the global reads, on the awkward cases that reach every layout, vec
 * width, both epilogues, accumulate and batch offsets; compiled trusted (no runtime checks). */
const TILES: [string, "branch" | "select"][] = [["128x256x32-4x4-s1", "branch"], ["256x128x32-8x2-s1", "select"]];
const TILE_NAMES = [...TILES.map(([t]) => t), "128x256x32-2x4-s1", "256x128x16-4x2-s2"];
const TILE_CASES = [1, 4, 6, 7, 11, 13].map((i) => CASES[i]!);
describe("tensor-core matmul, other tiles (trusted) vs float64 reference", () => {
  let trusted: CoopMatmul | null = null;
  for (const [tn, guard] of TILES) {
    for (const c0 of TILE_CASES) {
      const c = { ...c0, tile: parseCoopTile(tn), guard };
      test.skipIf(!support.ok)(`${tn} ${guard} ${caseName(c)}`, async () => {
        if (!device) throw new Error("device not created");
        trusted ??= new CoopMatmul(device, { trusted: true });
        await runCase(device, trusted, c);
      }, 300_000);
    }
  }
  test.skipIf(!support.ok)("split-K 3 of 1000 rows (ragged last chunk), accumulate, 144x80 TN", async () => {
    if (!device) throw new Error("device not created");
    trusted ??= new CoopMatmul(device, { trusted: true });
    await runCase(device, trusted, { M: 144, N: 80, K: 1000, transA: true, input: "f16", accumulate: true, tile: parseCoopTile(TILES[0]![0]) }, 3);
  }, 300_000);
});

// The same kernels with the cooperative matrices emulated in plain WGSL (matmul-coop-wgsl.ts
// `emulate`), on any adapter with shader-f16 (lavapipe: 32 KiB of workgroup memory, so small
// tiles): the tiling, staging, guards, both epilogues, both stage counts and split-K are checked
// where the real builtins are not available.
const emuAdapter = support.ok ? null : adapter;
const emuSkip = !emuAdapter || !emuAdapter.features.has("shader-f16");
describe("emulated cooperative matrices (tiling and epilogues on any adapter)", () => {
  let emuDevice: GPUDevice | null = null;
  let emu: CoopMatmul | null = null;
  beforeAll(async () => {
    if (emuSkip) return;
    const l = emuAdapter!.limits;
    emuDevice = await emuAdapter!.requestDevice({
      requiredFeatures: ["shader-f16"],
      requiredLimits: { maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize, maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup, maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX },
    });
    emu = new CoopMatmul(emuDevice, { emulate: true, trusted: true });
  });
  afterAll(() => emuDevice?.destroy());
  const EMU: [string, Case][] = [
    ["64x64x32-2x2-s1", { M: 129, N: 67, K: 37, input: "f16", transA: true, epilogue: "scratch" }],
    ["64x32x16-2x1-s2", { M: 67, N: 131, K: 45, input: "f32", transB: true, accumulate: true, epilogue: "scratch" }],
    ["128x32x16-2x1-s2", { M: 144, N: 48, K: 52, input: "f16", transA: true, transB: true, vec: 1, accumulate: true }],
    ["64x64x32-2x2-s1", { M: 80, N: 96, K: 72, input: "f16", vec: 4, accumulate: true, epilogue: "direct" }],
    ["64x64x32-4x2-s1", { M: 67, N: 45, K: 41, input: "f16", transA: true, guard: "branch" }],
    ["64x64x16-2x2-s2", { M: 48, N: 64, K: 48, input: "f32", vec: 4, batch: 2, aOff: 4, bOff: 8, outOff: 4, strideA: 48 * 48 + 4, strideB: 48 * 64 + 12, strideOut: 48 * 64 + 4, accumulate: true }],
  ];
  for (const [tn, c0] of EMU) {
    const c = { ...c0, tile: parseCoopTile(tn) };
    test.skipIf(emuSkip)(`${tn} ${caseName(c)}`, async () => {
      if (!emuDevice || !emu) throw new Error("device not created");
      if (c.epilogue === "direct") expect(coopDirectEpilogueOk(c)).toBe(true);
      await runCase(emuDevice, emu, c);
    }, 300_000);
  }
  test.skipIf(emuSkip)("split-K 3 of 100 rows (ragged last chunk), accumulate, 80x48 TN", async () => {
    if (!emuDevice || !emu) throw new Error("device not created");
    await runCase(emuDevice, emu, { M: 80, N: 48, K: 100, transA: true, input: "f16", accumulate: true, tile: parseCoopTile("64x64x16-2x2-s2") }, 3);
  }, 300_000);
});

test("tile names: parsed, refused with the reason, and every listed tile fits 48 KiB", () => {
  expect(parseCoopTile("128x256x32-2x4-s1")).toEqual({ BM: 128, BN: 256, BK: 32, SGM: 2, SGN: 4, stages: 1 });
  expect(() => parseCoopTile("128x256")).toThrow(/expected BMxBNxBK-SGMxSGN-sS/);
  expect(() => parseCoopTile("128x128x24-2x4-s2")).toThrow(/BK must be a multiple of 16/);
  expect(() => parseCoopTile("96x128x32-4x4-s2")).toThrow(/multiple of 16·SGM/);
  for (const tn of TILE_NAMES) for (const transA of [false, true]) for (const transB of [false, true]) {
    expect(coopWorkgroupBytes({ transA, transB, tile: parseCoopTile(tn), epilogue: "scratch" })).toBeLessThanOrEqual(49152);
  }
  // a tile the generator cannot map is refused by name, not miscompiled
  expect(() => matmulCoopWGSL({ input: "f16", transA: false, transB: false, accumulate: false, tile: { BM: 128, BN: 128, BK: 32, SGM: 3, SGN: 4, stages: 2 } })).toThrow(/tile 128x128x32-3x4-s2/);
  expect(coopDirectEpilogueOk({ M: 32, N: 48 })).toBe(true);
  expect(coopDirectEpilogueOk({ M: 32, N: 50 })).toBe(false);
  expect(coopDirectEpilogueOk({ M: 32, N: 48, outOff: 2 })).toBe(false);
  expect(coopDirectEpilogueOk({ M: 32, N: 48, batch: 2, strideOut: 32 * 48 + 2 })).toBe(false);
});

test("block shape constants are the kernel's", () => {
  expect(COOP_TILE.BM * COOP_TILE.BK % COOP_TILE.WG).toBe(0);
  expect(COOP_TILE.WG / COOP_TILE.SUBGROUP).toBe(8);
});

describe("webgpu backend option tensorCores", () => {
  test.skipIf(support.ok)("refused with the reason where the feature is absent", async () => {
    await expect(WebGpuBackend.create(createGPU(), { tensorCores: true })).rejects.toThrow(/tensorCores requested but .*cooperative-matrix/);
  });

  test('"auto" uses them when supported, else keeps the FMA path and says why', async () => {
    const be = await WebGpuBackend.create(createGPU(), { tensorCores: "auto" });
    try {
      if (support.ok) expect(be.tensorCoresStatus.startsWith("on")).toBe(true);
      else expect(be.tensorCoresStatus).toBe(`off (${support.reason})`);
      const a = Float32Array.from({ length: 6 }, (_, i) => i + 1), b = Float32Array.from({ length: 6 }, (_, i) => 0.5 * i - 1);
      const A = be.alloc("f32", 6, "other"), B = be.alloc("f32", 6, "other"), O = be.alloc("f32", 4, "other");
      be.write({ buf: A, off: 0 }, a);
      be.write({ buf: B, off: 0 }, b);
      be.matmul({ buf: A, off: 0 }, { buf: B, off: 0 }, { buf: O, off: 0 }, { M: 2, N: 2, K: 3 });
      const got = Array.from((await be.read({ buf: O, off: 0 }, 4)) as Float32Array);
      expect(got).toEqual([1 * -1 + 2 * 0 + 3 * 1, 1 * -0.5 + 2 * 0.5 + 3 * 1.5, 4 * -1 + 5 * 0 + 6 * 1, 4 * -0.5 + 5 * 0.5 + 6 * 1.5]);
    } finally {
      be.destroy();
    }
  });

  const SHAPES: MatmulSpec[] = [
    { M: 1290, N: 1160, K: 37 },
    { M: 1161, N: 1289, K: 45, transB: true, accumulate: true },
    { M: 1031, N: 1300, K: 29, transA: true },
    { M: 640, N: 700, K: 33, transA: true, transB: true, batch: 4 },
  ];
  for (const spec of SHAPES) {
    const name = `${spec.M}x${spec.N}x${spec.K} ${spec.transA ? "T" : "N"}${spec.transB ? "T" : "N"}${spec.accumulate ? " accumulate" : ""}${spec.batch ? ` batch ${spec.batch}` : ""}: f16-rounded operands, f32 accumulation`;
    test.skipIf(!support.ok)(name, async () => {
      expect(coopBlocks(spec)).toBeGreaterThanOrEqual(COOP_MIN_BLOCKS);
      const be = await WebGpuBackend.create(createGPU(), { tensorCores: true });
      try {
        const batch = spec.batch ?? 1;
        const { M, N, K } = spec;
        const rnd = (n: number, seed: number) => Float32Array.from(rand16(n, seed), (x) => f16ToNumber(x) * 1.37 + 1e-3); // not f16-exact
        const a = rnd(batch * M * K, 3), b = rnd(batch * K * N, 4), o0 = rnd(batch * M * N, 5);
        const h = (x: number) => f16ToNumber(f16FromF32(x));
        const A = be.alloc("f32", a.length, "other"), B = be.alloc("f32", b.length, "other"), O = be.alloc("f32", o0.length, "other");
        be.write({ buf: A, off: 0 }, a);
        be.write({ buf: B, off: 0 }, b);
        be.write({ buf: O, off: 0 }, o0);
        be.matmul({ buf: A, off: 0 }, { buf: B, off: 0 }, { buf: O, off: 0 }, spec);
        const got = (await be.read({ buf: O, off: 0 }, o0.length)) as Float32Array;
        let worst16 = 0, worst32 = 0;
        for (let s = 0; s < 400; s++) {
          const bi = s % batch, m = (s * 7919) % M, n = (s * 104729 + (s % 3 === 0 ? N - 1 : 0)) % N;
          let r16 = 0, r32 = 0, mag = 0;
          for (let k = 0; k < K; k++) {
            const av = a[bi * M * K + (spec.transA ? k * M + m : m * K + k)]!, bv = b[bi * K * N + (spec.transB ? n * K + k : k * N + n)]!;
            r16 += h(av) * h(bv);
            r32 += av * bv;
            mag += Math.abs(av * bv);
          }
          const o = bi * M * N + m * N + n;
          const base = spec.accumulate ? o0[o]! : 0;
          worst16 = Math.max(worst16, Math.abs(got[o]! - base - r16) / (mag + Math.abs(base)));
          worst32 = Math.max(worst32, Math.abs(got[o]! - base - r32) / (mag + Math.abs(base)));
        }
        expect(worst16).toBeLessThan(1e-5); // the f16-rounded product, f32-accumulated
        expect(worst32).toBeGreaterThan(1e-5); // …and not the f32 product: the tensor-core path ran
      } finally {
        be.destroy();
      }
    }, 300_000);
  }
});

test("split-K chunks: whole BK multiples, a ragged last chunk only when K needs one", () => {
  expect(coopSplitKChunks(8192, 4, 32)).toEqual({ chunk: 2048, full: 4, last: 0 });
  expect(coopSplitKChunks(1000, 3, 32)).toEqual({ chunk: 352, full: 2, last: 296 });
  expect(coopSplitKChunks(100, 3, 16)).toEqual({ chunk: 48, full: 2, last: 4 });
  expect(coopSplitKChunks(20, 8, 32)).toEqual({ chunk: 32, full: 0, last: 20 });
  for (const [K, s, a] of [[8191, 8, 32], [37, 2, 16], [4096, 16, 32]] as const) {
    const { chunk, full, last } = coopSplitKChunks(K, s, a);
    expect(chunk % a).toBe(0);
    expect(full * chunk + last).toBe(K);
    expect(full + (last > 0 ? 1 : 0)).toBeLessThanOrEqual(s);
  }
  expect(() => coopSplitKChunks(100, 0, 16)).toThrow(/splits must be a positive integer/);
});
