/**
 * Dispatch planning for the fast matmul: from a {@link MatmulSpec} and the element offsets of the
 * three views to the shader variant, the params uniform and the workgroup grid.
 *
 * The WGSL itself comes from {@link matmulFastWGSL} (matmul-fast-wgsl.ts); the tile choice from
 * {@link chooseMatmulTile} (matmul-fast-tiles.ts).
 */
import type { MatmulSpec } from "../backend.ts";
import { chooseMatmulTile, DEFAULT_MATMUL_LIMITS, type MatmulLimits, tileFits } from "./matmul-fast-tiles.ts";
import { type MatmulStorage, type MatmulTile, type MatmulVariant, matmulFastWGSL, matmulParamWords, validateTile, variantKey } from "./matmul-fast-wgsl.ts";

/** The most workgroups a dispatch may have along one dimension (WebGPU default limit). */
const MAX_WORKGROUPS_PER_DIM = 65535;

/** Options of {@link planMatmulFast}. */
export interface MatmulFastOptions {
  /** Storage type of A and B (out is f32). Default "f32". */
  storage?: MatmulStorage;
  /** With f16 storage: read halves natively (needs the device feature `shader-f16`). Default false:
   * halves are read packed in u32 and widened with `unpack2x16float`. */
  f16Native?: boolean;
  /** Force a tile (tuning, tests); default: {@link chooseMatmulTile}. */
  tile?: MatmulTile;
  /** Unroll the K loop by two (see {@link MatmulVariant.unroll2}); default: the chosen tile's
   * setting, or false with a forced tile. */
  unroll2?: boolean;
  /** Prefetch distance in k-steps (see {@link MatmulVariant.prefetchDistance}); default: the
   * chosen tile's setting, or 0 with a forced tile. */
  prefetchDistance?: number;
  /** Tile rasterisation group (see {@link MatmulVariant.groupM}); default 8. */
  groupM?: number;
  /** Device limits (default: WebGPU's defaults). */
  limits?: MatmulLimits;
  /** Row stride (elements) of the operands whose rows run along K (A when not transA, B when
   * transB); default K. Larger than K when the matmul reads a K-chunk of longer rows (split-K). */
  ldk?: number;
  /** Never emit vec4 global loads/stores. Default: the chosen tile's preference
   * ({@link MatmulTileChoice.vecLoads}), or false (vec4 where legal) with a forced tile. */
  scalarOnly?: boolean;
}

/** Everything needed to record one fast-matmul dispatch. */
export interface MatmulFastPlan {
  variant: MatmulVariant;
  /** Pipeline cache key (equal keys ⇒ identical WGSL). */
  key: string;
  /** Contents of the params uniform (`MATMUL_PARAM_WORDS` u32 words). */
  params: Uint32Array;
  /** Workgroup counts [x, y, z] for `dispatchWorkgroups`; x = 0 means there is nothing to do. */
  workgroups: [number, number, number];
}

/** The WGSL of a plan's variant (convenience for pipeline creation). */
export function planWGSL(plan: MatmulFastPlan): string {
  return matmulFastWGSL(plan.variant);
}

function checkCount(name: string, v: number, min: number): void {
  if (!Number.isInteger(v) || v < min) throw new Error(`matmul spec: ${name} must be an integer ≥ ${min}, got ${v}`);
}

/**
 * Plans `out[b] = op(A[b])·op(B[b])` (+ out when `spec.accumulate`) for the fast kernel.
 * `offA/offB/offOut` are element offsets of the views (elements of the storage dtype for A and B,
 * f32 elements for out). Shapes, strides and flags as in {@link MatmulSpec}; omitted strides mean
 * densely packed batches (M·K, K·N, M·N). Throws on negative/non-integer sizes, on a grid beyond
 * 65535×65535 workgroups, or when a forced tile does not fit the limits.
 */
export function planMatmulFast(spec: MatmulSpec, offA: number, offB: number, offOut: number, opts: MatmulFastOptions = {}): MatmulFastPlan {
  const { M, N, K } = spec;
  const batch = spec.batch ?? 1;
  checkCount("M", M, 0); checkCount("N", N, 0); checkCount("K", K, 0); checkCount("batch", batch, 0);
  const transA = spec.transA ?? false, transB = spec.transB ?? false;
  const strideA = spec.strideA ?? M * K, strideB = spec.strideB ?? K * N, strideC = spec.strideOut ?? M * N;
  checkCount("strideA", strideA, 0); checkCount("strideB", strideB, 0); checkCount("strideOut", strideC, 0);
  checkCount("offA", offA, 0); checkCount("offB", offB, 0); checkCount("offOut", offOut, 0);
  const limits = opts.limits ?? DEFAULT_MATMUL_LIMITS;
  const choice = opts.tile ? null : chooseMatmulTile(M, N, batch, limits);
  const tile = opts.tile ?? choice!.tile;
  validateTile(tile);
  if (!tileFits(tile, limits)) throw new Error(`matmul: forced tile ${JSON.stringify(tile)} does not fit the device limits`);
  const storage = opts.storage ?? "f32";
  const scalar = opts.scalarOnly ?? (choice ? !choice.vecLoads : false);
  const multi = batch > 1;
  const ldk = opts.ldk ?? K;
  checkCount("ldk", ldk, K);
  const vecA = !scalar && (transA ? M % 4 === 0 : K % 4 === 0 && ldk % 4 === 0) && offA % 4 === 0 && (!multi || strideA % 4 === 0);
  const vecB = !scalar && (transB ? K % 4 === 0 && ldk % 4 === 0 : N % 4 === 0) && offB % 4 === 0 && (!multi || strideB % 4 === 0);
  const vecC = !scalar && N % 4 === 0 && offOut % 4 === 0 && (!multi || strideC % 4 === 0);
  const edges = M % tile.BM !== 0 || N % tile.BN !== 0 || K % tile.BK !== 0;
  const variant: MatmulVariant = {
    tile, storage, f16Native: storage === "f16" && (opts.f16Native ?? false), transA, transB, vecA, vecB, vecC, edges,
    groupM: opts.groupM ?? 8, unroll2: opts.unroll2 ?? choice?.unroll2 ?? false,
    prefetchDistance: opts.prefetchDistance ?? choice?.prefetchDistance ?? 0,
  };
  const tilesM = Math.ceil(M / tile.BM), tilesN = Math.ceil(N / tile.BN);
  const total = tilesM * tilesN * batch;
  let workgroups: [number, number, number] = [0, 0, 0];
  let gridX = 1;
  if (total > 0) {
    gridX = Math.min(total, MAX_WORKGROUPS_PER_DIM);
    const gridY = Math.ceil(total / gridX);
    if (gridY > MAX_WORKGROUPS_PER_DIM) throw new Error(`matmul: ${total} workgroups exceed the 65535×65535 grid (M=${M}, N=${N}, batch=${batch})`);
    workgroups = [gridX, gridY, 1];
  }
  const params = matmulParamWords({
    M, N, K, batch, offA, offB, offC: offOut, strideA, strideB, strideC, tilesM, tilesN, gridX, accumulate: spec.accumulate ?? false, ldk,
  });
  return { variant, key: variantKey(variant), params, workgroups };
}
