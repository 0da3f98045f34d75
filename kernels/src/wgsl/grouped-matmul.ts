/**
 * Grouped matmul over variable-length row segments in one dispatch (`GroupedMatmulDevSpec` and
 * `GroupedWeightGradSpec` in ../backend.ts; `Backend.groupedMatmul`, whose offsets are on the host,
 * uploads them and runs the same kernel). The scheduling follows CUTLASS's grouped GEMM and
 * MegaBlocks: row tiles never straddle two groups.
 *
 * The kernels come from the dense matmul's generator (matmul-fast-wgsl.ts, grouped modes "rows" and
 * "wgrad", see MatmulGroupedMode there): the same register blocking, double-buffered workgroup
 * staging and prefetch schedule, and tiles from the dense catalogue (matmul-fast-tiles.ts) within
 * the device's workgroup limits: 128×128×8 where it gives enough workgroups (measured fastest for
 * the grouped products, see pickTile), else the dense planner's choice; only the mapping of a
 * workgroup to its group and rows differs. Every product accumulates in f32, k ascending.
 *
 * Forward / dX (groupedMatmulDev): ⌈R/BM⌉ + G row-tile slots × ⌈N/BN⌉ column tiles. Slot s belongs
 * to the group g with Σ_{j<g} ⌈n_j/BM⌉ ≤ s < Σ_{j≤g} ⌈n_j/BM⌉ (n_j = offsets[j+1] − offsets[j]);
 * each workgroup finds it by one uniform scan of the offsets. Σ_g ⌈n_g/BM⌉ ≤ ⌈R/BM⌉ + G, so every
 * row of every group has a slot; slots past the last group return at once. Rows outside
 * [offsets[0], offsets[G]) are not touched.
 *
 * Weight gradient (groupedWeightGrad): dw[g] (+)= dy[rows_g]ᵀ · x[rows_g], a batched Aᵀ·B with
 * batch = G whose K loop runs over the group's rows. An empty group writes zeros (or leaves dw[g]
 * unchanged when accumulating). Not split along K: at the MoE bench shapes G·tiles is ≥ 256
 * workgroups (mixtral-small dW: 8 × 32 tiles of 128×128), about two waves of the H200's 132 SMs.
 */
import type { Buf } from "../backend.ts";
import type { GroupedDevGeometry, GroupedWGradGeometry } from "../grouped-matmul-spec.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { memoKernel, u32s } from "./launch.ts";
import type { MatmulForcedTile } from "./matmul-fast-launch.ts";
import { chooseMatmulTile, DEFAULT_MATMUL_LIMITS, MATMUL_TILE_CHOICES, type MatmulLimits, tileFits } from "./matmul-fast-tiles.ts";
import { GROUPED_MATMUL_PARAM_NAMES, type MatmulGroupedMode, type MatmulTile, type MatmulVariant, matmulFastWGSL, matmulParamWords, validateTile, variantKey } from "./matmul-fast-wgsl.ts";

/** The kernel of a grouped variant: buffers b_a, b_b, b_off (i32 offsets), b_out. */
function groupedKernel(v: MatmulVariant): Kernel {
  const label = `${variantKey(v)}_k`;
  return memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_a", type: "f32", write: false },
      { name: "b_b", type: "f32", write: false },
      { name: "b_off", type: "i32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s(...GROUPED_MATMUL_PARAM_NAMES),
    code: matmulFastWGSL(v, "kernel"),
  }));
}

/**
 * The catalogue entry the grouped products prefer: 128×128×8 with prefetch distance 4. Measured on
 * the H200 (docs/performance.md, "Grouped expert matmuls", `kernels/bench/grouped-matmul.ts --tiles
 * auto,128x256x16,128x128x16,128x128x8`): at every mixtral-med expert shape, forward, dX and dW, it
 * ran 31–41 TFLOP/s against 29–33 for the dense planner's 128×256×16 and 25–28 for 128×128×16, and
 * it was best or within 5% at the mixtral-small shapes.
 */
const GROUPED_PREFERRED = MATMUL_TILE_CHOICES.find((c) => c.tile.BM === 128 && c.tile.BN === 128 && c.tile.BK === 8 && c.tile.TM === 8 && c.tile.TN === 8);

/** The tile and K-loop schedule: the forced one (which must fit `limits`); else
 * {@link GROUPED_PREFERRED} where it fits and gives at least its `minWorkgroups` workgroups for an
 * `rows`×N output × batch; else the dense planner's choice for that output. */
function pickTile(rows: number, N: number, batch: number, limits: MatmulLimits, force: MatmulForcedTile | undefined): { tile: MatmulTile; prefetchDistance: number; unroll2: boolean } {
  if (force) {
    validateTile(force.tile);
    if (!tileFits(force.tile, limits)) throw new Error(`grouped matmul: forced tile ${JSON.stringify(force.tile)} does not fit the device limits`);
    return { tile: force.tile, prefetchDistance: force.prefetchDistance ?? 0, unroll2: force.unroll2 ?? false };
  }
  const p = GROUPED_PREFERRED;
  const c = p && tileFits(p.tile, limits) && Math.ceil(rows / p.tile.BM) * Math.ceil(N / p.tile.BN) * batch >= p.minWorkgroups ? p : chooseMatmulTile(rows, N, batch, limits);
  return { tile: c.tile, prefetchDistance: c.prefetchDistance, unroll2: c.unroll2 };
}

/** One grouped launch: `tilesM` row tiles (slots) × `tilesN` × `batch` workgroups on an x·y grid. */
function groupedLaunch(mode: MatmulGroupedMode, pick: ReturnType<typeof pickTile>, transB: boolean, bufs: Buf[], p: {
  M: number; N: number; K: number; batch: number; offA: number; offB: number; offC: number; strideB: number; strideC: number; tilesM: number; tilesN: number; accumulate: boolean; ldk: number; G: number; R: number; offOff: number;
}, maxPerDim: number): Launch {
  const v: MatmulVariant = {
    tile: pick.tile, storage: "f32", f16Native: false, transA: mode === "wgrad", transB, vecA: false, vecB: false, vecC: false, edges: true,
    unroll2: pick.unroll2, prefetchDistance: pick.prefetchDistance, groupM: 8, grouped: mode,
  };
  const total = p.tilesM * p.tilesN * p.batch;
  const gridX = Math.min(total, maxPerDim);
  const gridY = Math.ceil(total / gridX);
  if (gridY > maxPerDim) throw new Error(`grouped matmul: ${total} workgroups exceed the ${maxPerDim}×${maxPerDim} grid`);
  const words = matmulParamWords({ ...p, strideA: 0, gridX });
  return { kernel: groupedKernel(v), bufs, params: [...words.subarray(0, GROUPED_MATMUL_PARAM_NAMES.length - 3), p.G, p.R, p.offOff], workgroups: [gridX, gridY, 1] };
}

/**
 * Launch of {@link Backend.groupedMatmulDev}: out[rows_g] (+)= x[rows_g]·op(w_g) for every group,
 * x [R, K], w_g at woff + g·strideW ([K, N], or [N, K] with transB), out [R, N], offsets G + 1 i32
 * at offoff of `off` (all element offsets, f32 except the offsets). `limits` bound the tile choice
 * (the device's; default WebGPU's defaults), `maxPerDim` is the device's
 * maxComputeWorkgroupsPerDimension, `force` replaces the planner's tile (tuning, tests). Returns
 * null when nothing can be computed (G, R or N = 0). Throws when a forced tile does not fit.
 */
export function groupedMatmulDevLaunch(x: Buf, xoff: number, w: Buf, woff: number, off: Buf, offoff: number, out: Buf, ooff: number, g: GroupedDevGeometry, limits: MatmulLimits = DEFAULT_MATMUL_LIMITS, maxPerDim = 65535, force?: MatmulForcedTile): Launch | null {
  if (g.G === 0 || g.R === 0 || g.N === 0) return null;
  const pick = pickTile(g.R, g.N, 1, limits, force);
  const tilesM = Math.ceil(g.R / pick.tile.BM) + g.G;
  const tilesN = Math.ceil(g.N / pick.tile.BN);
  return groupedLaunch("rows", pick, g.transB, [x, w, off, out], {
    M: 0, N: g.N, K: g.K, batch: 1, offA: xoff, offB: woff, offC: ooff, strideB: g.strideW, strideC: 0, tilesM, tilesN,
    accumulate: g.accumulate, ldk: g.K, G: g.G, R: g.R, offOff: offoff,
  }, maxPerDim);
}

/**
 * Launch of {@link Backend.groupedWeightGrad}: dw_g (+)= dy[rows_g]ᵀ·x[rows_g] for every group,
 * dy [R, M], x [R, N], dw_g [M, N] at dwoff + g·strideW, offsets G + 1 i32 at offoff of `off`.
 * `limits`, `maxPerDim`, `force` as in {@link groupedMatmulDevLaunch}. Returns null when dw is
 * empty (G, M or N = 0).
 */
export function groupedWeightGradLaunch(dy: Buf, dyoff: number, x: Buf, xoff: number, off: Buf, offoff: number, dw: Buf, dwoff: number, g: GroupedWGradGeometry, limits: MatmulLimits = DEFAULT_MATMUL_LIMITS, maxPerDim = 65535, force?: MatmulForcedTile): Launch | null {
  if (g.G === 0 || g.M === 0 || g.N === 0) return null;
  const pick = pickTile(g.M, g.N, g.G, limits, force);
  return groupedLaunch("wgrad", pick, false, [dy, x, off, dw], {
    M: g.M, N: g.N, K: 0, batch: g.G, offA: dyoff, offB: xoff, offC: dwoff, strideB: 0, strideC: g.strideW,
    tilesM: Math.ceil(g.M / pick.tile.BM), tilesN: Math.ceil(g.N / pick.tile.BN), accumulate: g.accumulate, ldk: 0, G: g.G, R: g.R, offOff: offoff,
  }, maxPerDim);
}
