/**
 * Tile catalogue and per-shape tile choice for the fast matmul (matmul-fast-wgsl.ts).
 *
 * Big tiles (128×128, 8×8 per thread) give the most FMAs per byte of workgroup memory read and are
 * what large GEMMs need; but a shape with few output tiles would leave most of the GPU idle, so
 * smaller shapes take smaller tiles (the usual "wave quantisation" trade-off, see NVIDIA's
 * "Matrix Multiplication Background User's Guide", §"Wave quantization").
 */
import { type MatmulTile, type MatmulVariant, tileThreads, tileWorkgroupBytes, validateTile } from "./matmul-fast-wgsl.ts";

/** One planner choice: a tile, the fewest workgroups it must yield to be chosen, and whether its
 * global loads should be vec4 (where the layout allows) or scalar. */
export interface MatmulTileChoice {
  tile: MatmulTile;
  minWorkgroups: number;
  vecLoads: boolean;
  /** {@link MatmulVariant.prefetchDistance} to use with this tile. */
  prefetchDistance: number;
  /** {@link MatmulVariant.unroll2} to use with this tile. */
  unroll2: boolean;
  /** When set, the tile is also refused when its workgroups fill the last wave of
   * {@link ASSUMED_COMPUTE_UNITS} poorly: tiles / (⌈tiles / units⌉ · units) must be at least this. */
  minWaveEfficiency?: number;
}

/**
 * Compute units (SMs) assumed by the wave-quantisation rule of the tile choice. WebGPU does not
 * report the number; 132 is the NVIDIA H200's (and H100 SXM's) SM count, where the rule was
 * measured. On another GPU the rule only picks a different (still correct) tile.
 */
export const ASSUMED_COMPUTE_UNITS = 132;

/** Fraction of the last wave's slots a grid of `workgroups` (one per unit at a time) uses. */
export function waveEfficiency(workgroups: number, units = ASSUMED_COMPUTE_UNITS): number {
  return workgroups <= 0 ? 0 : workgroups / (Math.ceil(workgroups / units) * units);
}

/**
 * The planner's choices, largest tile first. Measured on an NVIDIA H200 through wgpu-native/Vulkan
 * (docs/performance.md, `bun run bench kernels --tune` and `core/bench/matmul-shapes.ts --sweep`):
 * 128×256×16 with 8×16 per thread and scalar loads was fastest at 2048³ and 4096³ (scalar beat
 * vec4 loads for the large tiles; interleaved prefetch at distance 4 with the K loop unrolled by
 * two added ~1.5% at 4096³, and +7% for 128×128×8) and wherever its grid fills whole waves of the
 * 132 SMs (8192×1024: 128 workgroups); 128×128×16 where 128×256 leaves a wave part-empty or too few
 * workgroups (8192×512, 2048×2816, 4096×512); 64×64 at 1024×1024 outputs, 64×32 and 32×32 below;
 * vec4 loads won for the small tiles (their prefetch options were not measured; they keep the
 * plain schedule).
 */
export const MATMUL_TILE_CHOICES: readonly MatmulTileChoice[] = [
  // 256 threads, 48 KiB
  { tile: { BM: 128, BN: 256, BK: 16, TM: 8, TN: 16, padA: 0, padB: 0 }, minWorkgroups: 128, vecLoads: false, prefetchDistance: 4, unroll2: true, minWaveEfficiency: 0.85 },
  // 256 threads, 32 KiB
  { tile: { BM: 128, BN: 128, BK: 16, TM: 8, TN: 8, padA: 0, padB: 0 }, minWorkgroups: 128, vecLoads: false, prefetchDistance: 4, unroll2: false },
  // 256 threads, 16 KiB
  { tile: { BM: 128, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 }, minWorkgroups: 128, vecLoads: false, prefetchDistance: 4, unroll2: false },
  // 128 threads, 12 KiB
  { tile: { BM: 128, BN: 64, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 }, minWorkgroups: 192, vecLoads: true, prefetchDistance: 0, unroll2: false },
  // 256 threads, 16 KiB
  { tile: { BM: 64, BN: 64, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 }, minWorkgroups: 128, vecLoads: true, prefetchDistance: 0, unroll2: false },
  // 128 threads, 12 KiB
  { tile: { BM: 64, BN: 32, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 }, minWorkgroups: 128, vecLoads: true, prefetchDistance: 0, unroll2: false },
  // 64 threads, 8 KiB
  { tile: { BM: 32, BN: 32, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 }, minWorkgroups: 0, vecLoads: true, prefetchDistance: 0, unroll2: false },
];

/** Every tile the planner may choose plus the 64×64×8 (8×8) tile, all tested on lavapipe. */
export const MATMUL_TILES: readonly MatmulTile[] = [
  ...MATMUL_TILE_CHOICES.map((c) => c.tile),
  { BM: 64, BN: 64, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 },
];
for (const t of MATMUL_TILES) validateTile(t);

/** Device limits that bound the tile choice (WebGPU `GPUSupportedLimits` names). */
export interface MatmulLimits {
  maxComputeWorkgroupStorageSize: number;
  maxComputeInvocationsPerWorkgroup: number;
}

/** WebGPU's default limits (what a device gets when it requests none). */
export const DEFAULT_MATMUL_LIMITS: MatmulLimits = { maxComputeWorkgroupStorageSize: 16384, maxComputeInvocationsPerWorkgroup: 256 };

/** True when the device limits admit the tile. */
export function tileFits(t: MatmulTile, limits: MatmulLimits): boolean {
  return tileWorkgroupBytes(t) <= limits.maxComputeWorkgroupStorageSize && tileThreads(t) <= limits.maxComputeInvocationsPerWorkgroup;
}

/**
 * Chooses a tile for an M×N output (times `batch`): the first of {@link MATMUL_TILE_CHOICES} that
 * fits `limits`, yields at least its `minWorkgroups` workgroups and, where it has one, meets its
 * `minWaveEfficiency` ({@link waveEfficiency}); if none does, the smallest that fits. Throws if no
 * tile fits the limits.
 */
export function chooseMatmulTile(M: number, N: number, batch: number, limits: MatmulLimits = DEFAULT_MATMUL_LIMITS): MatmulTileChoice {
  const fits = MATMUL_TILE_CHOICES.filter((c) => tileFits(c.tile, limits));
  if (fits.length === 0) {
    throw new Error(`matmul: no tile fits the device limits (workgroup storage ${limits.maxComputeWorkgroupStorageSize} B, ${limits.maxComputeInvocationsPerWorkgroup} invocations)`);
  }
  for (const c of fits) {
    const n = Math.ceil(M / c.tile.BM) * Math.ceil(N / c.tile.BN) * batch;
    if (n >= c.minWorkgroups && (c.minWaveEfficiency === undefined || waveEfficiency(n) >= c.minWaveEfficiency)) return c;
  }
  return fits[fits.length - 1]!;
}
