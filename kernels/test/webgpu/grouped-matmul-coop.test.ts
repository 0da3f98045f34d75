/**
 * The MoE grouped products on the tensor-core path (kernels/src/wgsl/grouped-matmul-coop.ts: the
 * grouped modes of the cooperative-matrix matmul) through the webgpu backend, at the awkward sizes
 * of kernels/test/ops/grouped-awkward.ts (groups of 0 and 1 rows, primes, rows outside the
 * offsets untouched, W strides with gaps, K = 0, accumulate on/off, transB both ways) against a
 * float64 reference.
 *
 * Inputs are multiples of 2^−10 in [−1, 1] times a power of two s, so the f16 staging of the
 * scaled kernel is exact and the result must match float64 to f32-accumulation accuracy (the FMA
 * path's tolerance, rtol 1e-4 of Σ|a·b|); at s = 2^18 an unscaled f16 staging would overflow to
 * inf, at s = 2^−22 flush to zero, so these pass only when each operand's power-of-two scale covers
 * every group's rows and weights. One more test feeds unrounded values and checks the result
 * differs from the FMA path by f16 rounding — i.e. the tensor-core kernels ran. Further tests (task
 * R review): values outside the product (W gaps, rows outside the offsets) must not set the scales;
 * device offsets below 0 / above R, 64 groups, NaN/inf in one expert, 2^±100 operands; tile
 * options refused at creation.
 *
 * Two backends: "emulated" tensor cores (the same kernels with plain-WGSL cooperative matrices,
 * any device with shader-f16: lavapipe in CI) and, where our library offers the
 * wgpu-cooperative-matrix feature (ZEROMOE_WGPU=coop on a GPU with it), the real ones.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { coopSupport } from "../../src/wgsl/matmul-coop.ts";
import type { CoopTile } from "../../src/wgsl/matmul-coop-tile.ts";
import { checkGroupedRows, checkGroupedWGrad, GROUPED_ROWS_CASES, GROUPED_WGRAD_CASES } from "../ops/grouped-awkward.ts";
import { Ctx, Rng } from "../ops/harness.ts";
import { refMatmul } from "../reference/matmul.ts";

/** {@link Rng} whose f32 values are multiples of 2^−10 in [−1, 1], times `scale` (a power of two):
 * exact in f16 after any power-of-two scaling that keeps them normal. */
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

const MAGNITUDES = [1, 2 ** 18, 2 ** -22];

function suite(kind: "emulated" | "real", skip: boolean): void {
  describe(`grouped matmuls on ${kind} tensor cores`, () => {
    let be: WebGpuBackend | null = null;
    let fma: WebGpuBackend | null = null;
    beforeAll(async () => {
      if (skip) return;
      be = await WebGpuBackend.create(createGPU(), { tensorCores: kind === "emulated" ? "emulated" : true, tensorCoreMinBlocks: 0 });
      fma = await WebGpuBackend.create(createGPU());
    });
    afterAll(() => {
      be?.destroy();
      fma?.destroy();
    });
    for (const s of MAGNITUDES) {
      test.skipIf(skip)(`groupedMatmulDev at awkward sizes, inputs × 2^${Math.log2(s)}`, async () => {
        const c = new Ctx(be!, { rtol: 1e-4, atol: 1e-5 * s * s }, 1);
        try {
          const r = new QuantRng(5100 + Math.log2(s), s);
          for (const cs of GROUPED_ROWS_CASES) for (const transB of [false, true]) for (const acc of [false, true]) await checkGroupedRows(c, r, cs, transB, acc);
        } finally {
          c.freeAll();
        }
      }, 600_000);
      test.skipIf(skip)(`groupedWeightGrad at awkward sizes, inputs × 2^${Math.log2(s)}`, async () => {
        const c = new Ctx(be!, { rtol: 1e-4, atol: 1e-5 * s * s }, 1);
        try {
          const r = new QuantRng(5200 + Math.log2(s), s);
          for (const cs of GROUPED_WGRAD_CASES) for (const acc of [false, true]) await checkGroupedWGrad(c, r, cs, acc);
        } finally {
          c.freeAll();
        }
      }, 600_000);
    }
    test.skipIf(skip)("unrounded inputs: the result differs from the FMA path by f16 rounding (the tensor-core kernels ran)", async () => {
      const R = 203, N = 77, K = 61, offsets = [0, 50, 50, 131, 203];
      const G = offsets.length - 1;
      const r = new Rng(5300);
      const x = r.f32(R * K), w = r.f32(G * N * K), dy = r.f32(R * N);
      const run = async (b: WebGpuBackend): Promise<[Float32Array, Float32Array]> => {
        const f = (d: Float32Array) => {
          const buf = b.alloc("f32", d.length, "other");
          b.write({ buf, off: 0 }, d);
          return buf;
        };
        const xb = f(x), wb = f(w), dyb = f(dy), ob = b.alloc("f32", R * N, "other"), dwb = b.alloc("f32", G * N * K, "other");
        const off = b.alloc("i32", G + 1, "other");
        b.write({ buf: off, off: 0 }, Int32Array.from(offsets));
        b.groupedMatmulDev({ buf: xb, off: 0 }, { buf: wb, off: 0 }, { buf: ob, off: 0 }, { buf: off, off: 0 }, { G, R, N, K });
        b.groupedWeightGrad({ buf: dyb, off: 0 }, { buf: xb, off: 0 }, { buf: dwb, off: 0 }, { buf: off, off: 0 }, { G, R, M: N, N: K });
        const out = [(await b.read({ buf: ob, off: 0 }, R * N)) as Float32Array, (await b.read({ buf: dwb, off: 0 }, G * N * K)) as Float32Array] as [Float32Array, Float32Array];
        for (const buf of [xb, wb, dyb, ob, dwb, off]) b.free(buf);
        return out;
      };
      const [tc, ref] = [await run(be!), await run(fma!)];
      for (const [i, name] of ["groupedMatmulDev", "groupedWeightGrad"].entries()) {
        // largest difference relative to the largest |result|: f16 keeps 11 significant bits, so
        // ~2^-11 per operand, partly averaged over the K terms; the FMA path agrees with float64
        // to ~1e-7 at these sizes
        let maxDiff = 0, maxRef = 0;
        for (let j = 0; j < ref[i]!.length; j++) {
          maxDiff = Math.max(maxDiff, Math.abs(tc[i]![j]! - ref[i]![j]!));
          maxRef = Math.max(maxRef, Math.abs(ref[i]![j]!));
        }
        const rel = maxDiff / maxRef;
        console.log(`${name}: largest difference to the FMA path ${rel.toExponential(2)} of the largest |result|`);
        expect(`${name}: ${rel > 1e-6 && rel < 1e-2}`).toBe(`${name}: true`);
      }
    }, 600_000);
  });
}

suite("emulated", !emulatable);
suite("real", !real.ok);

test("tensor-core grouped matmuls: where they are skipped, the reason is named", () => {
  if (!emulatable) console.log("grouped-matmul-coop: emulated tests skipped: the adapter lacks shader-f16");
  if (!real.ok) console.log(`grouped-matmul-coop: real tensor-core tests skipped: ${real.reason}`);
  expect(emulatable || !adapter).toBe(true);
});

test("grouped tensor-core variants outside their contract are refused by name", async () => {
  const { matmulCoopWGSL } = await import("../../src/wgsl/matmul-coop-wgsl.ts");
  const base = { input: "f32" as const, transA: false, transB: false, accumulate: false, scaled: true, mode: "kernel" as const };
  expect(() => matmulCoopWGSL({ ...base, mode: "module", grouped: "rows" })).toThrow(/grouped mode "rows" needs "kernel" mode/);
  expect(() => matmulCoopWGSL({ ...base, grouped: "rows", epilogue: "direct" })).toThrow(/needs the "scratch" epilogue/);
  expect(() => matmulCoopWGSL({ ...base, grouped: "rows", transA: true })).toThrow(/needs transA false/);
  expect(() => matmulCoopWGSL({ ...base, grouped: "wgrad" })).toThrow(/needs transA true and transB false/);
  expect(matmulCoopWGSL({ ...base, grouped: "wgrad", transA: true })).toContain("coop_off(grp)");
  if (adapter && emulatable) await expect(WebGpuBackend.create(createGPU(), { tensorCores: "emulated", tensorCoreMinBlocks: -1 })).rejects.toThrow(/tensorCoreMinBlocks must be an integer ≥ 0, got -1/);
  // accepted only where it acts
  if (adapter) await expect(WebGpuBackend.create(createGPU(), { tensorCoreMinBlocks: 0 })).rejects.toThrow(/tensorCoreMinBlocks needs tensorCores/);
});

/**
 * Elements the product does not use must not enter its power-of-two scales: the gaps between
 * groups' W (strideW > N·K) and the rows outside [offsets[0], offsets[G]) of x (forward / dX) and of
 * dy and x (weight gradient). They used to: the max-abs ran over the whole span of each operand, so
 * 2^100 in a gap or in a padding row set the scale, every used value (~1) was staged as
 * 2^(14−100) → 0 in f16, and every result came out 0.
 */
describe("grouped tensor-core scales cover only the elements the product uses", () => {
  let be: WebGpuBackend | null = null;
  beforeAll(async () => {
    if (emulatable) be = await WebGpuBackend.create(createGPU(), { tensorCores: "emulated", tensorCoreMinBlocks: 0 });
  });
  afterAll(() => be?.destroy());
  const HUGE = 2 ** 100;

  test.skipIf(!emulatable)("groupedMatmulDev: 2^100 in the W gaps and in x's rows outside the offsets", async () => {
    const c = new Ctx(be!, { rtol: 1e-4, atol: 1e-6 }, 1);
    try {
      const r = new QuantRng(5400, 1);
      const R = 41, N = 7, K = 13, sW = N * K + 6, offsets = [3, 17, 17, 36];
      const G = offsets.length - 1;
      for (const transB of [false, true]) {
        const x = r.f32(R * K), w = r.f32((G - 1) * sW + N * K), init = r.f32(R * N);
        for (let g = 0; g + 1 < G; g++) w.fill(HUGE, g * sW + N * K, (g + 1) * sW);
        x.fill(HUGE, 0, offsets[0]! * K);
        x.fill(-HUGE, offsets[G]! * K);
        const out = c.output(R * N, "f32", init);
        be!.groupedMatmulDev(c.input(x), c.input(w), out.view, c.ints(offsets), { G, R, N, K, transB, strideW: sW });
        const got = await out.read();
        const want = Float64Array.from(init), mag = Float64Array.from(init, Math.abs);
        for (let g = 0; g < G; g++) {
          const r0 = offsets[g]!, M = offsets[g + 1]! - r0;
          if (M === 0) continue;
          const ref = refMatmul(x, r0 * K, w, g * sW, new Float64Array(R * N), r0 * N, { M, N, K, transB });
          want.set(ref.out.subarray(r0 * N, (r0 + M) * N), r0 * N);
          mag.set(ref.mag.subarray(r0 * N, (r0 + M) * N), r0 * N);
        }
        c.close(`groupedMatmulDev with 2^100 outside the product (${transB ? "transB" : "K×N"})`, got, want, { mag, factor: 4 });
      }
    } finally {
      c.freeAll();
    }
  }, 600_000);

  test.skipIf(!emulatable)("groupedWeightGrad: 2^100 in dy's and x's rows outside the offsets", async () => {
    const c = new Ctx(be!, { rtol: 1e-4, atol: 1e-6 }, 1);
    try {
      const r = new QuantRng(5500, 1);
      const R = 37, M = 11, N = 9, offsets = [2, 20, 20, 31];
      const G = offsets.length - 1;
      const dy = r.f32(R * M), x = r.f32(R * N);
      dy.fill(HUGE, 0, offsets[0]! * M);
      x.fill(-HUGE, offsets[G]! * N);
      const dw = c.output(G * M * N, "f32", r.f32(G * M * N));
      be!.groupedWeightGrad(c.input(dy), c.input(x), dw.view, c.ints(offsets), { G, R, M, N });
      const got = await dw.read();
      const want = new Float64Array(G * M * N), mag = new Float64Array(G * M * N);
      for (let g = 0; g < G; g++) {
        const r0 = offsets[g]!, rows = offsets[g + 1]! - r0;
        if (rows === 0) continue;
        const ref = refMatmul(dy, r0 * M, x, r0 * N, new Float64Array(G * M * N), g * M * N, { M, N, K: rows, transA: true });
        want.set(ref.out.subarray(g * M * N, (g + 1) * M * N), g * M * N);
        mag.set(ref.mag.subarray(g * M * N, (g + 1) * M * N), g * M * N);
      }
      c.close("groupedWeightGrad with 2^100 outside the product", got, want, { mag, factor: 4 });
    } finally {
      c.freeAll();
    }
  }, 600_000);
});

/**
 * Offsets a MoE router can produce on the device and special values, through the emulated
 * tensor-core path against float64: offsets below 0 and above R (clamped to [0, R]), 64 groups
 * with every row in the last, NaN and inf in one expert's weights (left out of the shared scale:
 * NaN/inf only in the rows f32 arithmetic gives them, every other expert's rows exact) and
 * operands of 2^−100 against 2^100 (the scales keep both in f16's range).
 */
describe("grouped tensor-core products: clamped offsets, many groups, special values", () => {
  let be: WebGpuBackend | null = null;
  beforeAll(async () => {
    if (emulatable) be = await WebGpuBackend.create(createGPU(), { tensorCores: "emulated", tensorCoreMinBlocks: 0 });
  });
  afterAll(() => be?.destroy());

  /** Runs groupedMatmulDev with raw device `offsets` and checks it against float64 with the
   * offsets clamped to [0, R] (an end below its start: empty); NaN where the reference is NaN. */
  async function rowsCase(c: Ctx, label: string, x: Float32Array, w: Float32Array, offsets: number[], R: number, N: number, K: number, transB: boolean): Promise<void> {
    const G = offsets.length - 1;
    const init = new QuantRng(5600, 1).f32(R * N);
    const out = c.output(R * N, "f32", init);
    be!.groupedMatmulDev(c.input(x), c.input(w), out.view, c.ints(offsets), { G, R, N, K, transB });
    const got = await out.read();
    const want = Float64Array.from(init), mag = Float64Array.from(init, Math.abs);
    const clamp = (o: number) => Math.min(Math.max(o, 0), R);
    for (let g = 0; g < G; g++) {
      const r0 = clamp(offsets[g]!), M = Math.max(clamp(offsets[g + 1]!), r0) - r0;
      if (M === 0) continue;
      const ref = refMatmul(x, r0 * K, w, g * N * K, new Float64Array(R * N), r0 * N, { M, N, K, transB });
      want.set(ref.out.subarray(r0 * N, (r0 + M) * N), r0 * N);
      mag.set(ref.mag.subarray(r0 * N, (r0 + M) * N), r0 * N);
    }
    const nan = (i: number) => !Number.isFinite(want[i]!);
    // 0 finite, 1 NaN, ±2 ±inf: got must be non-finite exactly where float64 is, and the same kind
    const kind = (v: number) => (Number.isNaN(v) ? 1 : Number.isFinite(v) ? 0 : 2 * Math.sign(v));
    c.exact(`${label}: non-finite results`, Array.from(got, kind), Array.from(want, kind));
    const keep = (a: ArrayLike<number>) => Array.from(a).filter((_, i) => !nan(i));
    c.close(label, keep(got), keep(want), { mag: keep(mag), factor: 4 });
  }

  test.skipIf(!emulatable)("offsets clamped, 64 groups with every row in the last, NaN/inf in one expert, 2^±100", async () => {
    const c = new Ctx(be!, { rtol: 1e-4, atol: 1e-6 }, 1);
    try {
      const r = new QuantRng(5700, 1);
      for (const transB of [false, true]) {
        let R = 40, N = 6, K = 5;
        await rowsCase(c, "offsets −5, 10, 100 of R = 40", r.f32(R * K), r.f32(2 * N * K), [-5, 10, 100], R, N, K, transB);
        R = 70;
        const many = [0, ...new Array<number>(63).fill(0), R];
        await rowsCase(c, "64 groups, every row in the last", r.f32(R * K), r.f32(64 * N * K), many, R, N, K, transB);
        R = 25;
        const w = r.f32(3 * N * K);
        w[2] = NaN; // expert 0: column 2 (K×N) or row 0 (transB) poisoned
        w[N * K + 7] = Infinity; // expert 1
        await rowsCase(c, "NaN and inf in experts 0 and 1", r.f32(R * K), w, [0, 10, 19, 25], R, N, K, transB);
        const tiny = new QuantRng(5800, 2 ** -100).f32(R * K), huge = new QuantRng(5900, 2 ** 100).f32(3 * N * K);
        await rowsCase(c, "x × 2^−100, w × 2^100", tiny, huge, [0, 10, 19, 25], R, N, K, transB);
      }
    } finally {
      c.freeAll();
    }
  }, 600_000);
});

test("a malformed tensorCoreTile, or one given without tensorCores, is refused at creation by name", async () => {
  if (!adapter) return;
  // BK 8 used to be accepted and fail at the first matmul; stages 3 was reported as exceeding the
  // device's limits; a block without tensorCores was ignored
  const bad = [
    [{ BM: 64, BN: 64, BK: 8, SGM: 2, SGN: 2, stages: 1 }, "emulated", /tensorCoreTile 64x64x8-2x2-s1: BK must be a multiple of 16/],
    [{ BM: 64, BN: 64, BK: 32, SGM: 2, SGN: 2, stages: 3 }, "emulated", /tensorCoreTile 64x64x32-2x2-s3: stages must be 1 or 2/],
    [{ BM: 64, BN: 64, BK: 32, SGM: 2, SGN: 2, stages: 1 }, undefined, /tensorCoreTile 64x64x32-2x2-s1: needs tensorCores \(true, "auto" or "emulated"\), got undefined/],
  ] as const;
  for (const [tile, tensorCores, msg] of bad) {
    await expect(WebGpuBackend.create(createGPU(), { tensorCoreTile: tile as CoopTile, ...(tensorCores ? { tensorCores } : {}) })).rejects.toThrow(msg);
  }
});
