/**
 * The grouped matmuls (groupedMatmulDev, groupedWeightGrad: the grouped modes of the dense matmul
 * generator, kernels/src/wgsl/grouped-matmul.ts) through the webgpu backend (lavapipe in CI) with
 * every tile of the planner's catalogue forced in turn, with the K-loop schedule the planner gives
 * it (prefetch distance, unroll by two) — at the test sizes the planner alone would only pick the
 * smallest tile, while the H200 runs the 128×256 and 128×128 ones (a tile beyond the device's
 * workgroup memory runs with BK halved, see testedTiles). Cases and float64 checks from
 * kernels/test/ops/grouped-awkward.ts. Also: device offsets outside [0, R] are clamped.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { MATMUL_TILE_CHOICES, tileFits } from "../../src/wgsl/matmul-fast-tiles.ts";
import { type MatmulTile, type MatmulVariant, matmulFastWGSL, tileKey, variantKey } from "../../src/wgsl/matmul-fast-wgsl.ts";
import { checkGroupedRows, checkGroupedWGrad, GROUPED_ROWS_CASES, GROUPED_WGRAD_CASES } from "../ops/grouped-awkward.ts";
import { Ctx, Rng } from "../ops/harness.ts";
import { refMatmul } from "../reference/matmul.ts";

let be: WebGpuBackend;
beforeAll(async () => {
  be = await WebGpuBackend.create(createGPU());
});
afterAll(() => be.destroy());

const TOL = { rtol: 1e-4, atol: 1e-5 };

/** The catalogue's tiles as run here: a tile beyond this device's workgroup memory (lavapipe: 32 KiB,
 * so 128×256×16's 48 KiB) is run with BK halved — the same thread layout, micro-tile, prefetch and
 * unroll — which must fit. */
function testedTiles(): { tile: MatmulTile; prefetchDistance: number; unroll2: boolean; note: string }[] {
  const limits = { maxComputeWorkgroupStorageSize: be.device.limits.maxComputeWorkgroupStorageSize, maxComputeInvocationsPerWorkgroup: be.device.limits.maxComputeInvocationsPerWorkgroup };
  return MATMUL_TILE_CHOICES.map((ch) => {
    const tile = tileFits(ch.tile, limits) ? ch.tile : { ...ch.tile, BK: ch.tile.BK / 2 };
    if (!tileFits(tile, limits)) throw new Error(`tile ${tileKey(ch.tile)} does not fit this device even with BK halved`);
    return { tile, prefetchDistance: ch.prefetchDistance, unroll2: ch.unroll2, note: tile === ch.tile ? "" : ` as ${tileKey(tile)}` };
  });
}

describe("grouped matmul with every catalogue tile forced", () => {
  for (const [i, ch] of MATMUL_TILE_CHOICES.entries()) {
    test(`tile ${tileKey(ch.tile)} (prefetch ${ch.prefetchDistance}${ch.unroll2 ? ", unroll2" : ""})`, async () => {
      const t = testedTiles()[i]!;
      if (t.note) console.log(`tile ${tileKey(ch.tile)} exceeds this device's workgroup memory: run${t.note}`);
      be.setKernelOptions({ matmulTuning: { tile: { tile: t.tile, prefetchDistance: t.prefetchDistance, unroll2: t.unroll2 } } });
      const c = new Ctx(be, TOL, 1);
      try {
        const r = new Rng(4900);
        for (const cs of GROUPED_ROWS_CASES) for (const transB of [false, true]) await checkGroupedRows(c, r, cs, transB, transB);
        for (const cs of GROUPED_WGRAD_CASES) await checkGroupedWGrad(c, r, cs, cs.M % 2 === 1);
      } finally {
        c.freeAll();
        be.setKernelOptions({ matmulTuning: {} });
      }
    }, 300000);
  }
});

describe("grouped matmul device offsets", () => {
  test("offsets below 0 and above R are clamped to [0, R]", async () => {
    const c = new Ctx(be, TOL, 1);
    try {
      const r = new Rng(5000);
      const R = 9, N = 6, K = 5, G = 3;
      const given = [-3, 4, 4, 50], used = [0, 4, 4, 9];
      const x = r.f32(R * K), w = r.f32(G * N * K);
      const out = c.output(R * N);
      c.be.groupedMatmulDev(c.input(x), c.input(w), out.view, c.ints(given), { G, R, N, K, transB: true });
      const want = new Float64Array(R * N), mag = new Float64Array(R * N);
      for (let g = 0; g < G; g++) {
        const r0 = used[g]!, M = used[g + 1]! - r0;
        if (M === 0) continue;
        const ref = refMatmul(x, r0 * K, w, g * N * K, new Float64Array(R * N), r0 * N, { M, N, K, transB: true });
        want.set(ref.out.subarray(r0 * N, (r0 + M) * N), r0 * N);
        mag.set(ref.mag.subarray(r0 * N, (r0 + M) * N), r0 * N);
      }
      c.close("groupedMatmulDev clamped offsets", await out.read(), want, { mag, factor: 4 });
      const dw = c.output(G * N * K);
      const dy = r.f32(R * N);
      c.be.groupedWeightGrad(c.input(dy), c.input(x), dw.view, c.ints(given), { G, R, M: N, N: K });
      const wantW = new Float64Array(G * N * K), magW = new Float64Array(G * N * K);
      for (let g = 0; g < G; g++) {
        const r0 = used[g]!, rows = used[g + 1]! - r0;
        if (rows === 0) continue;
        const ref = refMatmul(dy, r0 * N, x, r0 * K, new Float64Array(G * N * K), g * N * K, { M: N, N: K, K: rows, transA: true });
        wantW.set(ref.out.subarray(g * N * K, (g + 1) * N * K), g * N * K);
        magW.set(ref.mag.subarray(g * N * K, (g + 1) * N * K), g * N * K);
      }
      c.close("groupedWeightGrad clamped offsets", await dw.read(), wantW, { mag: magW, factor: 4 });
    } finally {
      c.freeAll();
    }
  });
});

describe("grouped generator modes", () => {
  const base: MatmulVariant = {
    tile: { BM: 128, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 }, storage: "f32", f16Native: false, transA: false, transB: true,
    vecA: false, vecB: false, vecC: false, edges: true, unroll2: false, prefetchDistance: 4, groupM: 8,
  };
  test("refuse what they do not support, naming it", () => {
    expect(() => matmulFastWGSL({ ...base, grouped: "rows" }, "standalone")).toThrow(/grouped mode "rows" needs "kernel" binding mode/);
    expect(() => matmulFastWGSL({ ...base, grouped: "rows", edges: false }, "kernel")).toThrow(/needs edges/);
    expect(() => matmulFastWGSL({ ...base, grouped: "rows", storage: "f16" }, "kernel")).toThrow(/needs f32 storage/);
    expect(() => matmulFastWGSL({ ...base, grouped: "rows", transA: true }, "kernel")).toThrow(/needs transA false/);
    expect(() => matmulFastWGSL({ ...base, grouped: "wgrad" }, "kernel")).toThrow(/needs transA true and transB false/);
  });
  test("a grouped variant has its own key and reads the offsets; the dense one does not", () => {
    expect(variantKey({ ...base, grouped: "rows" })).toBe(`${variantKey(base)}_grprows`);
    expect(matmulFastWGSL({ ...base, grouped: "rows" }, "kernel")).toContain("b_off[P.offOff + g]");
    expect(matmulFastWGSL(base, "kernel")).not.toContain("b_off");
  });
});
