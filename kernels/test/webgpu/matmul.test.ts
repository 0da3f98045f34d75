/**
 * The fast WGSL matmul (kernels/src/wgsl/matmul_fast*.ts) on a real WebGPU device (lavapipe in CI)
 * against an independent float64 reference: every tile of the catalogue, awkward sizes (1, primes,
 * 129, non-multiples of every tile), all four transpose combinations, vec4 and scalar load paths,
 * batches with strides, broadcast (stride 0), element offsets, accumulate, K = 0, f16 storage
 * (packed and native), and a grid past 65535 workgroups. Sizes stay small: lavapipe runs on 2 cores.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { MatmulSpec } from "../../src/backend.ts";
import { f16FromNumber, f16ToNumber } from "../../src/numerics/index.ts";
import { planMatmulFast, type MatmulFastOptions } from "../../src/wgsl/matmul-fast.ts";
import { MatmulFastPipelines } from "../../src/wgsl/matmul-fast-pipeline.ts";
import { chooseMatmulTile, DEFAULT_MATMUL_LIMITS, MATMUL_TILE_CHOICES, MATMUL_TILES, waveEfficiency } from "../../src/wgsl/matmul-fast-tiles.ts";
import { type MatmulTile, matmulFastWGSL, tileWorkgroupBytes, validateTile } from "../../src/wgsl/matmul-fast-wgsl.ts";
import { planMatmulFastLaunches } from "../../src/wgsl/matmul-fast-launch.ts";
import { assembleWgsl } from "../../src/webgpu/kernel.ts";
import { randomF64 } from "../../src/testing.ts";
import type { Buf, DType } from "../../src/backend.ts";

// ---------------------------------------------------------------------------------------------
// device

async function acquireGPU(): Promise<GPU> {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (nav?.gpu) return nav.gpu;
  const ffiPath = new URL("../../src/ffi/index.ts", import.meta.url).href;
  const mod = (await import(ffiPath)) as { createGPU: () => GPU | Promise<GPU> };
  return await mod.createGPU();
}

let device: GPUDevice;
let pipes: MatmulFastPipelines;
let hasF16 = false;
const gpuErrors: string[] = [];

beforeAll(async () => {
  const gpu = await acquireGPU();
  const adapter = await gpu.requestAdapter();
  if (!adapter) throw new Error("matmul.test: no WebGPU adapter (is lavapipe / a Vulkan driver installed?)");
  hasF16 = adapter.features.has("shader-f16");
  device = await adapter.requestDevice({
    requiredFeatures: hasF16 ? ["shader-f16"] : [],
    requiredLimits: { maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize, maxComputeInvocationsPerWorkgroup: adapter.limits.maxComputeInvocationsPerWorkgroup },
  });
  device.addEventListener("uncapturederror", (ev) => gpuErrors.push((ev as GPUUncapturedErrorEvent).error.message));
  pipes = new MatmulFastPipelines(device);
});

afterAll(() => {
  device?.destroy();
});

// ---------------------------------------------------------------------------------------------
// host data and the float64 reference

/** Random values in [-1, 1) with a fixed seed (never zeros, never constant). */
function random(n: number, seed: number): Float64Array {
  return randomF64(n, seed * 2654435761);
}

/** Rounds to the storage type (f32 or f16) so the reference sees exactly what the GPU sees. */
function rounded(x: Float64Array, storage: "f32" | "f16"): Float64Array {
  return storage === "f32" ? x.map((v) => Math.fround(v)) : x.map((v) => f16ToNumber(f16FromNumber(v)));
}

/** Float64 reference: out[b][i][j] (+)= Σ_k op(A[b])[i][k]·op(B[b])[k][j]; also Σ|terms| per output. */
function reference(a: Float64Array, offA: number, b: Float64Array, offB: number, c0: Float64Array, offC: number, s: Required<MatmulSpec>): { out: Float64Array; mag: Float64Array } {
  const { M, N, K, batch } = s;
  const out = Float64Array.from(c0), mag = new Float64Array(c0.length);
  for (let bb = 0; bb < batch; bb++) {
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let acc = 0, m = 0;
        for (let k = 0; k < K; k++) {
          const av = a[offA + bb * s.strideA + (s.transA ? k * M + i : i * K + k)]!;
          const bv = b[offB + bb * s.strideB + (s.transB ? j * K + k : k * N + j)]!;
          acc += av * bv; m += Math.abs(av * bv);
        }
        const o = offC + bb * s.strideOut + i * N + j;
        out[o] = s.accumulate ? c0[o]! + acc : acc;
        mag[o] = m + (s.accumulate ? Math.abs(c0[o]!) : 0);
      }
    }
  }
  return { out, mag };
}

function storageBuffer(bytes: Uint8Array): GPUBuffer {
  const size = Math.max(16, Math.ceil(bytes.byteLength / 16) * 16);
  const buf = device.createBuffer({ size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC });
  const padded = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
  padded.set(bytes);
  device.queue.writeBuffer(buf, 0, padded);
  return buf;
}

function encode(x: Float64Array, storage: "f32" | "f16"): Uint8Array {
  if (storage === "f32") return new Uint8Array(Float32Array.from(x).buffer);
  return new Uint8Array(Uint16Array.from(x, (v) => f16FromNumber(v)).buffer);
}

async function readF32(buf: GPUBuffer, n: number): Promise<Float32Array> {
  const rb = device.createBuffer({ size: buf.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(buf, 0, rb, 0, buf.size);
  device.queue.submit([enc.finish()]);
  await rb.mapAsync(GPUMapMode.READ);
  const out = new Float32Array(rb.getMappedRange().slice(0, n * 4));
  rb.unmap();
  rb.destroy();
  return out;
}

interface Case {
  spec: MatmulSpec;
  offA?: number; offB?: number; offC?: number;
  opts?: MatmulFastOptions;
}

/**
 * Runs one case on the GPU and returns the largest error relative to the float64 reference,
 * normalised by Σ|a·b| (+|c0|) of that output (f32 accumulation keeps it ≲ 1e-6 here), and the
 * plan's key. Outputs outside the matrices (offset padding, gaps between strided batches) must
 * keep their initial values: that is checked exactly.
 */
async function runCase(c: Case, seed: number): Promise<{ err: number; key: string }> {
  const storage = c.opts?.storage ?? "f32";
  const s: Required<MatmulSpec> = {
    M: c.spec.M, N: c.spec.N, K: c.spec.K, batch: c.spec.batch ?? 1, transA: c.spec.transA ?? false, transB: c.spec.transB ?? false,
    strideA: c.spec.strideA ?? c.spec.M * c.spec.K, strideB: c.spec.strideB ?? c.spec.K * c.spec.N, strideOut: c.spec.strideOut ?? c.spec.M * c.spec.N,
    accumulate: c.spec.accumulate ?? false,
  };
  const offA = c.offA ?? 0, offB = c.offB ?? 0, offC = c.offC ?? 0;
  const span = (stride: number, size: number) => (s.batch === 0 ? 0 : (s.batch - 1) * stride + size);
  const a = rounded(random(offA + span(s.strideA, s.M * s.K) + 1, seed), storage);
  const b = rounded(random(offB + span(s.strideB, s.K * s.N) + 1, seed + 1), storage);
  const c0 = rounded(random(offC + span(s.strideOut, s.M * s.N) + 3, seed + 2), "f32");
  const plan = planMatmulFast(s, offA, offB, offC, c.opts);
  const A = storageBuffer(encode(a, storage)), B = storageBuffer(encode(b, storage)), C = storageBuffer(encode(c0, "f32"));
  const P = pipes.paramsBuffer(plan);
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pipes.dispatch(pass, plan, pipes.bindGroup(plan, A, B, C, P));
  pass.end();
  device.queue.submit([enc.finish()]);
  const got = await readF32(C, c0.length);
  A.destroy(); B.destroy(); C.destroy(); P.destroy();
  const { out, mag } = reference(a, offA, b, offB, c0, offC, s);
  let err = 0;
  for (let i = 0; i < out.length; i++) {
    const e = mag[i] === 0 ? (got[i] === out[i] ? 0 : Infinity) : Math.abs(got[i]! - out[i]!) / mag[i]!;
    if (!(e <= err)) err = e; // NaN counts as failure
  }
  return { err, key: plan.key };
}

const TOL = 2e-6;
/** Per-test limit: lavapipe compiles each shader variant on 2 shared cores, so allow for contention. */
const GPU_TEST_MS = 90_000;
let seed = 1;
async function expectCase(c: Case): Promise<void> {
  const { err, key } = await runCase(c, seed++);
  if (!(err <= TOL)) throw new Error(`matmul ${JSON.stringify(c)} (${key}): relative error ${err} > ${TOL}`);
  expect(gpuErrors).toEqual([]);
}

// ---------------------------------------------------------------------------------------------
// tests

const T128: MatmulTile = { BM: 128, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 };
const T64x8: MatmulTile = { BM: 64, BN: 64, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 };
const T32: MatmulTile = { BM: 32, BN: 32, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 };

/** The tile as run on this device: a catalogue tile needing more workgroup memory than the device
 * offers (lavapipe: 32 KiB; 128×256×16 needs 48 KiB) runs with BK halved until it fits — the same
 * generated code paths (same threads, micro-tile and load mapping per k-row) at a smaller depth. */
function onThisDevice(t: MatmulTile): MatmulTile {
  let r = { ...t };
  while (tileWorkgroupBytes(r) > device.limits.maxComputeWorkgroupStorageSize && r.BK > 8) r = { ...r, BK: r.BK / 2 };
  return r;
}

describe("fast matmul: every tile, edges and transposes", () => {
  for (const catalogueTile of MATMUL_TILES) {
    const t = catalogueTile;
    const name = `${t.BM}x${t.BN}x${t.BK}/${t.TM}x${t.TN}`;
    test(`${name}: 1×1×1, primes, 129×67×37, all transposes`, async () => {
      const tile = onThisDevice(catalogueTile);
      const limits = { maxComputeWorkgroupStorageSize: device.limits.maxComputeWorkgroupStorageSize, maxComputeInvocationsPerWorkgroup: device.limits.maxComputeInvocationsPerWorkgroup };
      await expectCase({ spec: { M: 1, N: 1, K: 1 }, opts: { tile, limits } });
      await expectCase({ spec: { M: 129, N: 67, K: 37 }, opts: { tile, limits } }); // scalar loads (K, N odd)
      await expectCase({ spec: { M: 131, N: 68, K: 20, transA: true }, opts: { tile, limits } }); // vec4 B, scalar A (M odd)
      await expectCase({ spec: { M: 36, N: 45, K: 44, transB: true }, opts: { tile, limits } }); // vec4 A and B (K % 4 == 0), scalar C
      await expectCase({ spec: { M: 13, N: 11, K: 17, transA: true, transB: true }, opts: { tile, limits } });
      await expectCase({ spec: { M: 40, N: 44, K: 36, transB: true }, opts: { tile, limits, scalarOnly: true, prefetchDistance: 4 } });
      // the schedule the planner uses with this tile
      const choice = MATMUL_TILE_CHOICES.find((c) => c.tile === catalogueTile);
      if (choice) {
        const o = { tile, limits, scalarOnly: !choice.vecLoads, prefetchDistance: choice.prefetchDistance, unroll2: choice.unroll2 };
        await expectCase({ spec: { M: 2 * tile.BM + 3, N: tile.BN + 5, K: 3 * tile.BK + 1 }, opts: o });
        await expectCase({ spec: { M: tile.BM, N: 2 * tile.BN, K: 4 * tile.BK, transA: true }, opts: o });
      }
    }, GPU_TEST_MS);
  }
  test("K loop unrolled by two (odd and even numbers of K-slices, 1 slice, edges)", async () => {
    const tile = T32; // small shader, quick to compile on lavapipe
    // same (edge, scalar) variant: 3, 2 and 1 K-slices
    await expectCase({ spec: { M: 33, N: 21, K: 3 * tile.BK }, opts: { tile, unroll2: true } });
    await expectCase({ spec: { M: 20, N: 37, K: tile.BK + 5 }, opts: { tile, unroll2: true } });
    await expectCase({ spec: { M: 7, N: 9, K: 1 }, opts: { tile, unroll2: true } });
    // unguarded vec4 variant, 2 and 3 slices
    await expectCase({ spec: { M: 64, N: 32, K: 2 * tile.BK }, opts: { tile, unroll2: true } });
    await expectCase({ spec: { M: 32, N: 64, K: 3 * tile.BK }, opts: { tile, unroll2: true } });
  }, GPU_TEST_MS);
  test("interleaved prefetch (distances 1, 4, BK), alone and with the K loop unrolled by two", async () => {
    const tile = T32;
    for (const [prefetchDistance, unroll2] of [[1, false], [4, true], [16, false]] as const) {
      await expectCase({ spec: { M: 33, N: 21, K: 3 * tile.BK + 3, transB: true }, opts: { tile, prefetchDistance, unroll2 } });
      await expectCase({ spec: { M: 64, N: 32, K: 2 * tile.BK }, opts: { tile, prefetchDistance, unroll2 } });
      await expectCase({ spec: { M: 5, N: 3, K: 1 }, opts: { tile, prefetchDistance, unroll2 } });
    }
    await expectCase({ spec: { M: 40, N: 72, K: 24, transA: true }, opts: { tile: T128, prefetchDistance: 4 } });
  }, GPU_TEST_MS);
  test("tile-aligned shapes use the unguarded variant and are exact", async () => {
    const tile = T64x8;
    const plan = planMatmulFast({ M: 64, N: 128, K: 24 }, 0, 0, 0, { tile });
    expect(plan.variant.edges).toBe(false);
    expect(plan.variant.vecA && plan.variant.vecB && plan.variant.vecC).toBe(true);
    await expectCase({ spec: { M: 64, N: 128, K: 24 }, opts: { tile } });
    await expectCase({ spec: { M: 128, N: 64, K: 16, transA: true, transB: true }, opts: { tile } });
  }, GPU_TEST_MS);
});

describe("fast matmul: batches, strides, offsets, accumulate", () => {
  test("batch 3 with dense strides, accumulate, element offsets", async () => {
    await expectCase({ spec: { M: 29, N: 31, K: 23, batch: 3, accumulate: true }, offA: 5, offB: 2, offC: 7 });
    await expectCase({ spec: { M: 33, N: 40, K: 12, batch: 3, transA: true }, offA: 4, offB: 8, offC: 4 }); // vec4 paths with offsets
  }, GPU_TEST_MS);
  test("broadcast B (strideB 0) and gaps between output batches", async () => {
    await expectCase({ spec: { M: 17, N: 19, K: 11, batch: 4, strideB: 0, strideOut: 17 * 19 + 5 } });
    await expectCase({ spec: { M: 8, N: 12, K: 20, batch: 2, strideA: 0, transB: true, accumulate: true } });
  }, GPU_TEST_MS);
  test("scalar-only path agrees (forced), with offsets not multiples of 4", async () => {
    await expectCase({ spec: { M: 37, N: 40, K: 16, transB: true }, offA: 3, offB: 1, offC: 2, opts: { scalarOnly: true } });
    await expectCase({ spec: { M: 40, N: 36, K: 16 }, offA: 1, opts: { tile: T128 } }); // A falls back to scalar, B stays vec4
  }, GPU_TEST_MS);
  test("K = 0 writes zeros, or leaves out unchanged with accumulate; M = 0 dispatches nothing", async () => {
    await expectCase({ spec: { M: 5, N: 7, K: 0 } });
    await expectCase({ spec: { M: 5, N: 7, K: 0, accumulate: true } });
    expect(planMatmulFast({ M: 0, N: 7, K: 3 }, 0, 0, 0).workgroups).toEqual([0, 0, 0]);
    await expectCase({ spec: { M: 0, N: 7, K: 3 } });
  }, GPU_TEST_MS);
  test("grid beyond 65535 workgroups is folded into two dimensions", async () => {
    const tile = T32;
    const spec = { M: 1, N: 32 * 65537 + 3, K: 1 };
    const plan = planMatmulFast(spec, 0, 0, 0, { tile });
    expect(plan.workgroups[0]).toBe(65535);
    expect(plan.workgroups[1]).toBe(2);
    await expectCase({ spec, opts: { tile } });
  }, GPU_TEST_MS);
});

describe("fast matmul: f16 storage", () => {
  test("packed halves (unpack2x16float): edges, transposes, vec4 and scalar", async () => {
    await expectCase({ spec: { M: 67, N: 45, K: 29 }, opts: { storage: "f16" } });
    await expectCase({ spec: { M: 36, N: 44, K: 40, transA: true, transB: true }, opts: { storage: "f16" } });
    await expectCase({ spec: { M: 20, N: 24, K: 16, batch: 2, accumulate: true }, offA: 4, offB: 4, opts: { storage: "f16", tile: T128 } });
    await expectCase({ spec: { M: 9, N: 10, K: 11 }, offA: 1, offB: 3, opts: { storage: "f16" } });
  }, GPU_TEST_MS);
  test("native f16 (shader-f16) where the adapter offers it, else the packed path is what runs", async () => {
    const f16Native = hasF16;
    await expectCase({ spec: { M: 67, N: 45, K: 29 }, opts: { storage: "f16", f16Native } });
    await expectCase({ spec: { M: 36, N: 44, K: 40, transB: true }, offA: 4, opts: { storage: "f16", f16Native } });
    await expectCase({ spec: { M: 9, N: 10, K: 11, transA: true }, offB: 3, opts: { storage: "f16", f16Native } });
  }, GPU_TEST_MS);
});

describe("fast matmul: planning (no device)", () => {
  test("tile choice: big shapes get the biggest tile that fits, small ones smaller tiles; catalogue tiles are valid", () => {
    for (const t of MATMUL_TILES) expect(() => validateTile(t)).not.toThrow();
    const h200 = { maxComputeWorkgroupStorageSize: 49152, maxComputeInvocationsPerWorkgroup: 1024 };
    expect(chooseMatmulTile(4096, 4096, 1, h200).tile).toEqual(MATMUL_TILE_CHOICES[0]!.tile);
    expect(chooseMatmulTile(4096, 4096, 1, h200).vecLoads).toBe(false);
    // WebGPU's default limits (16 KiB) exclude the 48 KiB tile: 128×128 is next
    expect(chooseMatmulTile(4096, 4096, 1).tile.BN).toBe(128);
    const small = chooseMatmulTile(64, 64, 1, h200).tile;
    expect(small.BM * small.BN).toBeLessThanOrEqual(32 * 32);
    expect(chooseMatmulTile(1024, 1024, 1, h200).tile.BM).toBe(64);
    // wave quantisation (132 SMs assumed): 8192×1024 is 128 tiles of 128×256 (one full wave), but
    // 2048×2816 is 176 (1.33 waves) and 4096×512 only 64: those take 128×128×16
    expect(chooseMatmulTile(8192, 1024, 1, h200).tile).toEqual(MATMUL_TILE_CHOICES[0]!.tile);
    expect(chooseMatmulTile(2048, 2816, 1, h200).tile).toMatchObject({ BM: 128, BN: 128, BK: 16 });
    expect(chooseMatmulTile(4096, 512, 1, h200).tile).toMatchObject({ BM: 128, BN: 128, BK: 16 });
    expect(waveEfficiency(128)).toBeCloseTo(128 / 132);
    expect(waveEfficiency(176)).toBeCloseTo(176 / 264);
    expect(waveEfficiency(0)).toBe(0);
    // a tile needing more workgroup memory than allowed is never chosen
    const t = chooseMatmulTile(4096, 4096, 1, { ...DEFAULT_MATMUL_LIMITS, maxComputeWorkgroupStorageSize: 8192 }).tile;
    expect(tileWorkgroupBytes(t)).toBeLessThanOrEqual(8192);
  });
  test("invalid input is refused with a message naming the field", () => {
    expect(() => planMatmulFast({ M: -1, N: 2, K: 2 }, 0, 0, 0)).toThrow(/M must be an integer/);
    expect(() => planMatmulFast({ M: 2, N: 2.5, K: 2 }, 0, 0, 0)).toThrow(/N must be an integer/);
    expect(() => planMatmulFast({ M: 2, N: 2, K: 2 }, -4, 0, 0)).toThrow(/offA/);
    expect(() => validateTile({ BM: 128, BN: 128, BK: 6, TM: 8, TN: 8, padA: 0, padB: 0 })).toThrow(/BK must be/);
    expect(() => validateTile({ BM: 100, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 })).toThrow(/BM \(100\) must be a multiple of TM/);
    expect(() => planMatmulFast({ M: 65536 * 32, N: 65536 * 32, K: 1 }, 0, 0, 0, { tile: T32 })).toThrow(/65535×65535/);
  });
  test("the generated WGSL compiles for every tile, transpose and storage combination", async () => {
    for (const tile of MATMUL_TILES) {
      for (const storage of ["f32", "f16"] as const) {
        for (const transA of [false, true]) {
          for (const vec of [false, true]) {
            const code = matmulFastWGSL({ tile, storage, f16Native: false, transA, transB: !transA, vecA: vec, vecB: vec, vecC: vec, edges: !vec, groupM: 8, unroll2: vec, prefetchDistance: vec ? 4 : 0 });
            device.pushErrorScope("validation");
            device.createShaderModule({ code });
            const e = await device.popErrorScope();
            if (e) throw new Error(`WGSL of ${JSON.stringify(tile)} ${storage} transA=${transA} vec=${vec} fails: ${e.message}`);
          }
        }
      }
    }
  }, GPU_TEST_MS);
});

describe("fast matmul through the backend's Launch/Kernel convention", () => {
  /** Runs the launches of planMatmulFastLaunches with the backend's WGSL assembler over raw buffers. */
  async function runLaunches(bufs: { buf: Buf; gpu: GPUBuffer }[], launches: ReturnType<typeof planMatmulFastLaunches>): Promise<void> {
    const gpuOf = new Map(bufs.map((x) => [x.buf.id, x.gpu]));
    const enc = device.createCommandEncoder();
    for (const l of launches) {
      const asm = assembleWgsl(l.kernel, l.bufs.map((b) => b.id));
      const pipe = device.createComputePipeline({ layout: "auto", compute: { module: device.createShaderModule({ code: asm.source }), entryPoint: "main" } });
      const params = new Uint32Array(Math.ceil(l.params.length / 4) * 4);
      params.set(l.params);
      const ub = device.createBuffer({ size: params.byteLength, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
      device.queue.writeBuffer(ub, 0, params);
      const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: ub } }];
      asm.slotOf.forEach((slot, i) => {
        if (!entries.some((e) => e.binding === slot + 1)) entries.push({ binding: slot + 1, resource: { buffer: gpuOf.get(l.bufs[i]!.id)! } });
      });
      const pass = enc.beginComputePass();
      pass.setPipeline(pipe);
      pass.setBindGroup(0, device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries }));
      const w = l.workgroups as readonly [number, number, number];
      pass.dispatchWorkgroups(w[0], w[1], w[2]);
      pass.end();
    }
    device.queue.submit([enc.finish()]);
  }
  const fakeBuf = (id: number, dtype: DType, length: number): Buf => ({ id, dtype, length, tag: "activation" });

  test("f32 and f16 storage, transposes, accumulate, offsets; a and out in one buffer", async () => {
    const cases: { spec: MatmulSpec; storage: "f32" | "f16"; offA: number; offB: number; offC: number }[] = [
      { spec: { M: 45, N: 38, K: 29, transB: true, accumulate: true }, storage: "f32", offA: 3, offB: 0, offC: 5 },
      { spec: { M: 130, N: 66, K: 20, transA: true, batch: 2 }, storage: "f32", offA: 0, offB: 7, offC: 0 },
      { spec: { M: 17, N: 24, K: 33 }, storage: "f16", offA: 1, offB: 2, offC: 0 },
    ];
    let sd = 500;
    for (const c of cases) {
      const s: Required<MatmulSpec> = { batch: 1, transA: false, transB: false, accumulate: false, strideA: c.spec.M * c.spec.K, strideB: c.spec.K * c.spec.N, strideOut: c.spec.M * c.spec.N, ...c.spec } as Required<MatmulSpec>;
      const nA = c.offA + s.batch * s.M * s.K, nB = c.offB + s.batch * s.K * s.N, nC = c.offC + s.batch * s.M * s.N;
      const a = rounded(random(nA, sd++), c.storage), b = rounded(random(nB, sd++), c.storage), c0 = rounded(random(nC, sd++), "f32");
      const A = storageBuffer(encode(a, c.storage)), B = storageBuffer(encode(b, c.storage)), C = storageBuffer(encode(c0, "f32"));
      const bA = fakeBuf(1, c.storage, nA), bB = fakeBuf(2, c.storage, nB), bC = fakeBuf(3, "f32", nC);
      await runLaunches([{ buf: bA, gpu: A }, { buf: bB, gpu: B }, { buf: bC, gpu: C }], planMatmulFastLaunches(bA, c.offA, bB, c.offB, bC, c.offC, s));
      const got = await readF32(C, nC);
      const { out, mag } = reference(a, c.offA, b, c.offB, c0, c.offC, s);
      for (let i = 0; i < nC; i++) {
        const err = mag[i] === 0 ? Math.abs(got[i]! - out[i]!) : Math.abs(got[i]! - out[i]!) / mag[i]!;
        if (!(err <= TOL)) throw new Error(`launch case ${JSON.stringify(c)}: element ${i} got ${got[i]} want ${out[i]}`);
      }
      A.destroy(); B.destroy(); C.destroy();
    }
    // a and out are views of one buffer (merged binding): out = A[0:M×K] · B written after it
    const M = 9, N = 11, K = 7;
    const flat = rounded(random(M * K + M * N, sd++), "f32"), b = rounded(random(K * N, sd++), "f32");
    const F = storageBuffer(encode(flat, "f32")), B = storageBuffer(encode(b, "f32"));
    const bF = fakeBuf(10, "f32", flat.length), bB = fakeBuf(11, "f32", b.length);
    await runLaunches([{ buf: bF, gpu: F }, { buf: bB, gpu: B }], planMatmulFastLaunches(bF, 0, bB, 0, bF, M * K, { M, N, K }));
    const got = await readF32(F, flat.length);
    const s: Required<MatmulSpec> = { M, N, K, batch: 1, transA: false, transB: false, accumulate: false, strideA: M * K, strideB: K * N, strideOut: M * N };
    const { out, mag } = reference(flat, 0, b, 0, flat, M * K, s);
    for (let i = 0; i < flat.length; i++) {
      const err = mag[i] === 0 ? Math.abs(got[i]! - out[i]!) : Math.abs(got[i]! - out[i]!) / mag[i]!;
      if (!(err <= TOL)) throw new Error(`aliased launch: element ${i} got ${got[i]} want ${out[i]}`);
    }
    expect(gpuErrors).toEqual([]);
  }, GPU_TEST_MS);

  test("refuses mixed dtypes and M = 0 plans nothing", () => {
    const f = fakeBuf(1, "f32", 100), h = fakeBuf(2, "f16", 100);
    expect(() => planMatmulFastLaunches(f, 0, h, 0, f, 0, { M: 2, N: 2, K: 2 })).toThrow(/f32\/f32\/f32 or f16\/f16\/f32/);
    expect(planMatmulFastLaunches(f, 0, f, 0, fakeBuf(3, "f32", 10), 0, { M: 0, N: 2, K: 2 })).toEqual([]);
  });
});
