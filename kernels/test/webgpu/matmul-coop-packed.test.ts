/**
 * The tensor-core path with packed operands (kernels/src/wgsl/matmul-coop-pack.ts, the `packed`
 * kernels of matmul-coop-wgsl.ts, split-K and the per-problem plan of matmul-coop-plan.ts) against
 * float64 references, on every operand staging ("regs" with 8- and 16-byte loads, "coop", "none"):
 *
 * - dense matmuls through the webgpu backend at awkward sizes (primes, 1×1×1, M/N/K not multiples
 *   of any block), all four layouts, accumulate, batch with offsets, forced split-K with a ragged
 *   last chunk, inputs × 2^18 and × 2^−22 (an unscaled f16 staging would overflow / flush);
 * - the grouped products (forward/dX "rows", weight gradient) at the awkward cases of
 *   kernels/test/ops/grouped-awkward.ts plus 128 uneven groups (sizes 0, 1, … 9);
 * - 16-bit operands (bf16 and f16 buffers, as bf16/fp16 jobs hold parameters and gradients) through
 *   the launches on a raw device, dense with split-K and grouped.
 *
 * Inputs are f16-exact after the power-of-two scaling (multiples of 2^−10 in [−1, 1] times a power
 * of two; bf16 values have 8 significant bits), so the results must match float64 to f32
 * accumulation accuracy: |out − ref| ≤ 1e-4·Σ|a·b| (+ 1e-30 for zero rows).
 *
 * On lavapipe (no cooperative matrices) everything runs with the builtins emulated in plain WGSL
 * (`tensorCores: "emulated"`); with our library on a GPU with the feature the dense and grouped
 * backend cases also run on the real tensor cores.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Buf, DType, MatmulSpec } from "../../src/backend.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { bf16FromF32, bf16ToNumber } from "../../src/numerics/bf16.ts";
import { f16FromF32, f16ToNumber } from "../../src/numerics/f16.ts";
import { assembleWgsl, type Launch } from "../../src/webgpu/kernel.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import type { TensorCoreVariant } from "../../src/webgpu/tensor-cores.ts";
import { groupedCoopDevLaunches, groupedCoopWGradLaunches } from "../../src/wgsl/grouped-matmul-coop.ts";
import { coopFittingTiles, coopMatmulLaunches, type CoopLaunchConfig } from "../../src/wgsl/matmul-coop-launch.ts";
import { coopWorkgroupBytes } from "../../src/wgsl/matmul-coop-wgsl.ts";
import { COOP_WAVE_BLOCKS, planCoopMatmul } from "../../src/wgsl/matmul-coop-plan.ts";
import { COOP_DEFAULT_TILE, parseCoopTile } from "../../src/wgsl/matmul-coop-tile.ts";
import { coopSupport } from "../../src/wgsl/matmul-coop.ts";
import { checkGroupedRows, checkGroupedWGrad, GROUPED_ROWS_CASES, GROUPED_WGRAD_CASES, type GroupedRowsCase, type GroupedWGradCase } from "../ops/grouped-awkward.ts";
import { Ctx, Rng } from "../ops/harness.ts";
import { refMatmul } from "../reference/matmul.ts";

/** Multiples of 2^−10 in [−1, 1] times `scale`: exact in f16 after any power-of-two scaling. */
class QuantRng extends Rng {
  constructor(seed: number, readonly scale: number) {
    super(seed);
  }
  override f32(n: number, lo = -1, hi = 1): Float32Array {
    const a = super.f32(n, lo, hi);
    for (let i = 0; i < n; i++) a[i] = (Math.round(a[i]! * 1024) / 1024) * this.scale;
    return a;
  }
}

const adapter = await createGPU().requestAdapter();
const real = adapter ? coopSupport(adapter) : { ok: false, reason: "no adapter" };
const emulatable = !!adapter?.features.has("shader-f16");

/** The variants the backend cases run under, with the dense cases (indices into DENSE_CASES), the
 * split-K cases (into SPLIT_CASES) and whether the grouped cases run (every new pipeline costs
 * 10–40 s to compile on lavapipe, so each variant takes the layouts its code paths differ in;
 * the default "regs vec 8" also runs kernels/test/webgpu/grouped-matmul-coop.test.ts). */
const VARIANTS: { name: string; v: TensorCoreVariant; dense: number[]; split: number[]; grouped: boolean; tile?: { emulated: string; real: string } }[] = [
  { name: "regs vec 8", v: { staging: "regs", vec: 8 }, dense: [0, 1, 2, 3, 4], split: [0, 1], grouped: false },
  // the direct epilogue (16-aligned outputs: cases 5–7; the others fall back to the scratch) on a
  // two-stage BK 16 block whose A tile has fewer 16-byte vectors than invocations (loaded by the
  // first subgroups only); on the H200 the 16-subgroup form, whose forward (NT) layout does not fit
  // 48 KiB with the grouped products' scratch, so those fall back to the default block
  { name: "regs vec 8, direct epilogue, BK 16 two stages", v: { staging: "regs", vec: 8, epilogue: "auto" }, dense: [0, 5, 6, 7], split: [3], grouped: false, tile: { emulated: "64x128x16-2x4-s2", real: "128x256x16-4x4-s2" } },
  { name: "regs vec 4", v: { staging: "regs", vec: 4 }, dense: [0, 2], split: [], grouped: false },
  { name: "regs vec 8 typed mat2x4<f16>", v: { staging: "regs", vec: 8, vec8Type: "mat2x4" }, dense: [3], split: [], grouped: false }, // one layout: its pipeline takes minutes on lavapipe
  { name: "coop staging", v: { staging: "coop" }, dense: [0, 2, 4], split: [2], grouped: true },
  { name: "no staging", v: { staging: "none" }, dense: [0, 2, 4], split: [2], grouped: true },
];

interface DenseCase {
  M: number;
  N: number;
  K: number;
  transA?: boolean;
  transB?: boolean;
  accumulate?: boolean;
  batch?: number;
  /** element offsets of a, b, out inside larger buffers */
  offs?: [number, number, number];
}

const DENSE_CASES: DenseCase[] = [
  { M: 67, N: 45, K: 41 },
  { M: 1, N: 1, K: 1, transB: true },
  { M: 33, N: 70, K: 131, transA: true, accumulate: true },
  { M: 130, N: 17, K: 19, transB: true, accumulate: true },
  { M: 29, N: 37, K: 23, transA: true, transB: true, batch: 2, offs: [3, 5, 7] },
  // 16-aligned outputs (the direct epilogue where selected)
  { M: 48, N: 32, K: 41, transB: true, accumulate: true },
  { M: 64, N: 144, K: 23, transA: true },
  { M: 32, N: 16, K: 37, batch: 2, offs: [3, 5, 8], accumulate: true },
];

/** Worst |out − ref| / (Σ|a·b| + 1e-30) of a dense case on `be` with inputs from `r`. */
async function denseError(be: WebGpuBackend, r: Rng, c: DenseCase): Promise<number> {
  const batch = c.batch ?? 1;
  const [oa, ob, oo] = c.offs ?? [0, 0, 0];
  const spec: MatmulSpec = { M: c.M, N: c.N, K: c.K, transA: c.transA, transB: c.transB, accumulate: c.accumulate, batch };
  const a = r.f32(oa + batch * c.M * c.K), b = r.f32(ob + batch * c.K * c.N), o0 = r.f32(oo + batch * c.M * c.N);
  const up = (d: Float32Array) => {
    const buf = be.alloc("f32", d.length, "other");
    be.write({ buf, off: 0 }, d);
    return buf;
  };
  const [ab, bb, obuf] = [up(a), up(b), up(o0)];
  be.matmul({ buf: ab, off: oa }, { buf: bb, off: ob }, { buf: obuf, off: oo }, spec);
  const got = (await be.read({ buf: obuf, off: 0 }, o0.length)) as Float32Array;
  for (const x of [ab, bb, obuf]) be.free(x);
  const { out, mag } = refMatmul(a, oa, b, ob, o0, oo, spec);
  let worst = 0;
  for (let i = 0; i < o0.length; i++) {
    if (i < oo) {
      if (got[i] !== o0[i]) return Infinity; // before the output view: untouched
      continue;
    }
    worst = Math.max(worst, Math.abs(got[i]! - out[i]!) / (mag[i]! + 1e-30));
  }
  return worst;
}

/** 128 groups of 0…9 rows (several empty, several of one row) over R = 601 rows. */
function manyGroups(): number[] {
  const offs = [0];
  for (let g = 0; g < 128; g++) offs.push(offs[g]! + ((g * 7 + 3) % 10));
  return offs;
}
const MANY = manyGroups();
const ROWS_128: GroupedRowsCase = { name: "128 uneven groups of 0..9 rows", offsets: MANY, R: MANY[128]! + 4, N: 35, K: 21 };
const WGRAD_128: GroupedWGradCase = { name: "128 uneven groups of 0..9 rows", offsets: MANY, R: MANY[128]! + 4, M: 19, N: 23 };

const SPLIT_CASES: DenseCase[] = [{ M: 37, N: 29, K: 211, transA: true }, { M: 20, N: 41, K: 100, accumulate: true }, { M: 18, N: 9, K: 97, transB: true, transA: true, accumulate: true }, { M: 32, N: 48, K: 150, transA: true, accumulate: true }];

function backendSuite(kind: "emulated" | "real", skip: boolean): void {
  for (const { name, v, dense, split, grouped, tile } of VARIANTS) {
    const forced = tile ? { tensorCoreTile: parseCoopTile(tile[kind]) } : {};
    describe(`packed tensor-core operands, ${name}, ${kind}`, () => {
      let be: WebGpuBackend | null = null;
      beforeAll(async () => {
        if (!skip) be = await WebGpuBackend.create(createGPU(), { tensorCores: kind === "emulated" ? "emulated" : true, tensorCoreMinBlocks: 0, tensorCoreVariant: v, ...forced });
      });
      afterAll(() => be?.destroy());
      test.skipIf(skip)("dense: awkward sizes, layouts, accumulate, batch with offsets; × 2^18 and 2^-22", async () => {
        for (const [i, s] of [1, 2 ** 18, 2 ** -22].entries()) {
          const r = new QuantRng(6100 + i, s);
          for (const c of (i === 0 || kind === "real" ? dense.map((d) => DENSE_CASES[d]!) : [DENSE_CASES[dense[0]!]!])) {
            const e = await denseError(be!, r, c);
            expect(`${JSON.stringify(c)} × ${s}: ${e <= 1e-4 ? "ok" : e}`).toBe(`${JSON.stringify(c)} × ${s}: ok`);
          }
        }
      }, 600_000);
      test.skipIf(skip || split.length === 0)("dense split-K: 3 chunks (a ragged last one), accumulate", async () => {
        const sk = await WebGpuBackend.create(createGPU(), { tensorCores: kind === "emulated" ? "emulated" : true, tensorCoreMinBlocks: 0, tensorCoreVariant: { ...v, splitK: 3 }, ...forced });
        try {
          const r = new QuantRng(6200, 1);
          for (const c of split.map((i) => SPLIT_CASES[i]!)) {
            const e = await denseError(sk, r, c);
            expect(`${JSON.stringify(c)}: ${e <= 1e-4 ? "ok" : e}`).toBe(`${JSON.stringify(c)}: ok`);
          }
        } finally {
          sk.destroy();
        }
      }, 600_000);
      test.skipIf(skip || (kind === "emulated" && !grouped))("grouped forward/dX and weight gradient: awkward cases and 128 uneven groups", async () => {
        const c = new Ctx(be!, { rtol: 1e-4, atol: 1e-5 }, 1);
        try {
          const r = new QuantRng(6300, 1);
          // forward (transB) and dX (accumulate) over groups of 0 and 1 rows, primes, 128 uneven groups
          for (const cs of [GROUPED_ROWS_CASES[0]!, GROUPED_ROWS_CASES[2]!, ROWS_128]) {
            await checkGroupedRows(c, r, cs, true, false);
            await checkGroupedRows(c, r, cs, false, true);
          }
          // the weight gradient always runs the "regs" staging: checked once, under "coop"
          if (name === "coop staging" || kind === "real") for (const cs of [GROUPED_WGRAD_CASES[2]!, WGRAD_128]) await checkGroupedWGrad(c, r, cs, true);
        } finally {
          c.freeAll();
        }
      }, 600_000);
    });
  }
}

backendSuite("emulated", !emulatable);
backendSuite("real", !real.ok);

// ---- 16-bit operands through the launches on a raw device (emulated cooperative matrices) ------

describe("16-bit operands (bf16, f16) packed by the launches", () => {
  let device: GPUDevice | null = null;
  beforeAll(async () => {
    if (emulatable) device = await adapter!.requestDevice({ requiredFeatures: ["shader-f16"] });
  });
  afterAll(() => device?.destroy());

  let nextId = 1;
  const gpuOf = new Map<number, GPUBuffer>();
  const bufOf = (dtype: DType, length: number, data?: ArrayBufferView): Buf => {
    const id = nextId++;
    const bytes = Math.max(16, Math.ceil(Math.max(length * (dtype === "f16" || dtype === "bf16" ? 2 : 4), data?.byteLength ?? 0) / 16) * 16);
    const g = device!.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    if (data) {
      const padded = new Uint8Array(Math.ceil(data.byteLength / 4) * 4);
      padded.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      device!.queue.writeBuffer(g, 0, padded);
    }
    gpuOf.set(id, g);
    return { id, dtype, length, tag: "other" };
  };
  const scratches = new Map<string, Buf>();
  const scratch = (name: string, dtype: DType, length: number): Buf => {
    const cur = scratches.get(name);
    if (cur && cur.length >= length && cur.dtype === dtype) return cur;
    const b = bufOf(dtype, length);
    scratches.set(name, b);
    return b;
  };
  const run = (ls: Launch[]): void => {
    const enc = device!.createCommandEncoder();
    for (const l of ls) {
      const asm = assembleWgsl(l.kernel, l.bufs.map((b) => b.id));
      const pipe = device!.createComputePipeline({ layout: "auto", compute: { module: device!.createShaderModule({ code: asm.source }), entryPoint: "main" } });
      const params = new Uint32Array(Math.max(4, Math.ceil(l.params.length / 4) * 4));
      params.set(l.params);
      const ub = device!.createBuffer({ size: params.byteLength, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
      device!.queue.writeBuffer(ub, 0, params);
      const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: ub } }];
      asm.slotOf.forEach((slot, i) => {
        if (!entries.some((e) => e.binding === slot + 1)) entries.push({ binding: slot + 1, resource: { buffer: gpuOf.get(l.bufs[i]!.id)! } });
      });
      const pass = enc.beginComputePass();
      pass.setPipeline(pipe);
      pass.setBindGroup(0, device!.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries }));
      const w = l.workgroups as readonly [number, number, number];
      pass.dispatchWorkgroups(w[0], w[1], w[2]);
      pass.end();
    }
    device!.queue.submit([enc.finish()]);
  };
  const readF32 = async (b: Buf, n: number): Promise<Float32Array> => {
    const st = device!.createBuffer({ size: Math.max(16, Math.ceil((4 * n) / 16) * 16), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = device!.createCommandEncoder();
    enc.copyBufferToBuffer(gpuOf.get(b.id)!, 0, st, 0, st.size);
    device!.queue.submit([enc.finish()]);
    await st.mapAsync(GPUMapMode.READ);
    const out = new Float32Array(st.getMappedRange().slice(0, 4 * n));
    st.unmap();
    st.destroy();
    return out;
  };
  /** An operand of `dtype` holding f16-exact values near `scale`: the buffer and its values. */
  const operand = (dtype: DType, n: number, seed: number, scale: number): { buf: Buf; vals: Float64Array } => {
    const x = new QuantRng(seed, scale).f32(n);
    const vals = new Float64Array(n);
    if (dtype === "f32") {
      vals.set(x);
      return { buf: bufOf("f32", n, x), vals };
    }
    const bits = new Uint16Array(n + 2);
    for (let i = 0; i < n; i++) {
      bits[i] = dtype === "bf16" ? bf16FromF32(x[i]!) : f16FromF32(x[i]!);
      vals[i] = dtype === "bf16" ? bf16ToNumber(bits[i]!) : f16ToNumber(bits[i]!);
    }
    return { buf: bufOf(dtype, n, bits), vals };
  };
  const cfgOf = (staging: "regs" | "coop" | "none", splitK?: number): CoopLaunchConfig => ({ tile: parseCoopTile("64x64x32-2x2-s1"), emulate: true, staging, splitK });

  test.skipIf(!emulatable)("dense: bf16 × f32, f16 × f16, bf16 × bf16 (split-K 3; also on the coop and none stagings), × 2^-20 and 2^12", async () => {
    const cases: [DType, DType, MatmulSpec, number][] = [
      ["bf16", "f32", { M: 45, N: 38, K: 53 }, 2 ** -20],
      ["f16", "f16", { M: 19, N: 70, K: 33, transB: true }, 1],
      ["bf16", "bf16", { M: 24, N: 31, K: 150, transA: true, accumulate: true }, 2 ** 12],
    ];
    for (const staging of ["regs", "coop", "none"] as const) {
      for (const [i, [da, db, spec, s]] of cases.entries()) {
        if (staging !== "regs" && i !== 2) continue; // one case (split-K, transposed, accumulate) per fragment staging
        const { M, N, K } = spec;
        const a = operand(da, M * K, 7000 + i, s), b = operand(db, K * N, 7100 + i, i === 1 ? 1 : 1);
        const o0 = new QuantRng(7200 + i, 1).f32(M * N);
        const out = bufOf("f32", M * N, o0);
        run(coopMatmulLaunches(a.buf, 0, b.buf, 0, out, 0, spec, scratch, cfgOf(staging, i === 2 ? 3 : undefined)));
        const got = await readF32(out, M * N);
        const ref = refMatmul(a.vals, 0, b.vals, 0, o0, 0, spec);
        let worst = 0;
        for (let j = 0; j < M * N; j++) worst = Math.max(worst, Math.abs(got[j]! - ref.out[j]!) / (ref.mag[j]! + 1e-30));
        expect(`${staging} ${da}×${db} ${JSON.stringify(spec)}: ${worst <= 1e-4 ? "ok" : worst}`).toBe(`${staging} ${da}×${db} ${JSON.stringify(spec)}: ok`);
      }
    }
  }, 600_000);

  test.skipIf(!emulatable)("grouped: bf16 x and bf16 weights (forward, coop staging), f16 dy and bf16 x (weight gradient)", async () => {
    const offsets = [2, 2, 3, 40, 41, 77];
    const G = offsets.length - 1, R = 80, N = 27, K = 35;
    const off = bufOf("i32", G + 1, Int32Array.from(offsets));
    const x = operand("bf16", R * K, 7300, 2 ** 9), w = operand("bf16", G * K * N, 7301, 1);
    const o0 = new Float32Array(R * N).fill(7);
    const out = bufOf("f32", R * N, o0);
    run(groupedCoopDevLaunches(x.buf, 0, w.buf, 0, off, 0, out, 0, { G, R, N, K, transB: false, accumulate: false, strideW: K * N }, scratch, cfgOf("coop")));
    const got = await readF32(out, R * N);
    for (let r = 0; r < R; r++) {
      const g = offsets.findIndex((o, i) => i < G && r >= o && r < offsets[i + 1]!);
      for (let n = 0; n < N; n++) {
        let ref = 7, mag = 0;
        if (g >= 0) {
          ref = 0;
          for (let k = 0; k < K; k++) {
            const p = x.vals[r * K + k]! * w.vals[g * K * N + k * N + n]!;
            ref += p;
            mag += Math.abs(p);
          }
        }
        expect(Math.abs(got[r * N + n]! - ref)).toBeLessThanOrEqual(1e-4 * mag);
      }
    }
    const M = 13;
    const dy = operand("f16", R * M, 7302, 1);
    const dw = bufOf("f32", G * M * K);
    run(groupedCoopWGradLaunches(dy.buf, 0, x.buf, 0, off, 0, dw, 0, { G, R, M, N: K, accumulate: false, strideW: M * K }, scratch, cfgOf("regs")));
    const gw = await readF32(dw, G * M * K);
    for (let g = 0; g < G; g++) {
      for (let m = 0; m < M; m++) {
        for (let n = 0; n < K; n++) {
          let ref = 0, mag = 0;
          for (let r = offsets[g]!; r < offsets[g + 1]!; r++) {
            const p = dy.vals[r * M + m]! * x.vals[r * K + n]!;
            ref += p;
            mag += Math.abs(p);
          }
          expect(Math.abs(gw[g * M * K + m * K + n]! - ref)).toBeLessThanOrEqual(1e-4 * mag + 1e-30);
        }
      }
    }
  }, 600_000);
});

test("the plan: the largest block that fills a wave, else the widest grid with split-K", () => {
  const big = parseCoopTile("128x256x32-4x4-s1"), tall = parseCoopTile("256x128x32-8x2-s1"), small = parseCoopTile("128x128x32-2x4-s2");
  const c = [big, tall, small];
  expect(planCoopMatmul(4096, 4096, 4096, 1, c)).toEqual({ tile: big, splits: 1 });
  expect(planCoopMatmul(8192, 1024, 4096, 1, c).tile).toBe(tall); // tall problem, equal areas: the block's long side along M
  expect(planCoopMatmul(8192, 256, 1024, 1, c)).toEqual({ tile: small, splits: 1 }); // 128 blocks only at 128×128; K too short to split
  const dw = planCoopMatmul(1024, 1024, 8192, 1, c); // 64 blocks at 128×128 → 2 chunks fill a wave
  expect(dw.tile).toBe(small);
  expect(dw.splits).toBe(2);
  expect(planCoopMatmul(256, 1024, 8192, 1, c).splits).toBe(COOP_WAVE_BLOCKS / 16);
  expect(planCoopMatmul(256, 1024, 8192, 2, c).splits).toBe(1); // batches never split
  expect(planCoopMatmul(256, 1024, 8192, 1, c, 5).splits).toBe(5); // forced
  expect(() => planCoopMatmul(1, 1, 1, 1, [])).toThrow(/no candidate block/);
  expect(() => planCoopMatmul(1, 1, 1, 1, c, 0)).toThrow(/splitK must be a positive integer, got 0/);
});

test("blocks that do not fit a call's layout and epilogue in the device's workgroup memory are skipped", () => {
  const deep = parseCoopTile("128x256x16-4x4-s2"), tall = parseCoopTile("256x128x32-8x2-s1");
  const cfg = { tile: deep, candidates: [deep, tall], emulate: false, workgroupBytes: 48 * 1024 };
  // NT with the scratch: 36 KiB of two-stage tiles + 16 KiB scratch > 48 KiB; direct: fits
  expect(coopWorkgroupBytes({ transA: false, transB: true, tile: deep, scaled: true })).toBeGreaterThan(48 * 1024);
  expect(coopFittingTiles(cfg, { transA: false, transB: true, epilogue: "scratch" })).toEqual([tall]);
  expect(coopFittingTiles(cfg, { transA: false, transB: true, epilogue: "direct" })).toEqual([deep, tall]);
  // none fits: the default two-stage 128×128 block
  expect(coopFittingTiles({ ...cfg, candidates: [deep] }, { transA: false, transB: true, epilogue: "scratch" })).toEqual([COOP_DEFAULT_TILE]);
  expect(coopFittingTiles({ ...cfg, workgroupBytes: undefined }, { transA: false, transB: true, epilogue: "scratch" })).toEqual([deep, tall]);
});

test("tensorCoreVariant: values outside its choices, or without tensorCores, are refused by name", async () => {
  if (!adapter) return;
  await expect(WebGpuBackend.create(createGPU(), { tensorCoreVariant: { staging: "coop" } })).rejects.toThrow(/tensorCoreVariant: needs tensorCores/);
  if (!emulatable) return;
  await expect(WebGpuBackend.create(createGPU(), { tensorCores: "emulated", tensorCoreVariant: { staging: "tma" as "coop" } })).rejects.toThrow(/staging must be "regs", "coop" or "none", got tma/);
  await expect(WebGpuBackend.create(createGPU(), { tensorCores: "emulated", tensorCoreVariant: { vec: 2 as 4 } })).rejects.toThrow(/vec must be 4 or 8, got 2/);
  await expect(WebGpuBackend.create(createGPU(), { tensorCores: "emulated", tensorCoreVariant: { splitK: 0 } })).rejects.toThrow(/splitK must be an integer ≥ 1, got 0/);
  await expect(WebGpuBackend.create(createGPU(), { tensorCores: "emulated", tensorCoreVariant: { operands: "f32", staging: "coop" } })).rejects.toThrow(/apply to packed operands only/);
  await expect(WebGpuBackend.create(createGPU(), { tensorCores: "emulated", tensorCoreVariant: { epilogue: "direct" as "auto" } })).rejects.toThrow(/epilogue must be "scratch" or "auto", got direct/);
  await expect(WebGpuBackend.create(createGPU(), { tensorCores: "emulated", tensorCoreVariant: { vec8Type: "f16" as "u32" } })).rejects.toThrow(/vec8Type must be "u32" or "mat2x4", got f16/);
  await expect(WebGpuBackend.create(createGPU(), { tensorCores: "emulated", tensorCoreVariant: { operands: "f32", epilogue: "auto" } })).rejects.toThrow(/apply to packed operands only/);
});
