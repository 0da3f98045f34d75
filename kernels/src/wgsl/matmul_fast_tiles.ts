/**
 * Tile catalogue and per-shape tile choice for the fast matmul (matmul_fast_wgsl.ts).
 *
 * Big tiles (128×128, 8×8 per thread) give the most FMAs per byte of workgroup memory read and are
 * what large GEMMs need; but a shape with few output tiles would leave most of the GPU idle, so
 * smaller shapes take smaller tiles (the usual "wave quantisation" trade-off, see NVIDIA's
 * "Matrix Multiplication Background User's Guide", §"Wave quantization").
 */
import { type MatmulTile, tileThreads, tileWorkgroupBytes, validateTile } from "./matmul_fast_wgsl.ts";

/** The tiles the planner chooses from, largest first. All pass {@link validateTile}. */
export const MATMUL_TILES: readonly MatmulTile[] = [
  { BM: 128, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 }, // 256 threads, 16 KiB
  { BM: 128, BN: 64, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 }, // 128 threads, 12 KiB
  { BM: 64, BN: 64, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 }, // 256 threads, 16 KiB
  { BM: 64, BN: 64, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 }, // 64 threads, 8 KiB
  { BM: 32, BN: 32, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 }, // 64 threads, 8 KiB
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
 * Workgroups a dispatch should have before a bigger tile is preferred over a smaller one.
 * 264 = two per streaming multiprocessor of an H200 (132 SMs); on smaller GPUs it only makes the
 * choice lean towards smaller tiles a little earlier.
 */
export const MIN_WORKGROUPS = 264;

/**
 * Chooses a tile for an M×N output (times `batch`): the largest tile of {@link MATMUL_TILES} that
 * fits `limits` and still yields at least `minWorkgroups` workgroups; if none does, the one that
 * yields the most workgroups' worth of work with the least padding waste (the smallest that fits).
 * Throws if no tile fits the limits.
 */
export function chooseMatmulTile(M: number, N: number, batch: number, limits: MatmulLimits = DEFAULT_MATMUL_LIMITS, minWorkgroups = MIN_WORKGROUPS): MatmulTile {
  const fits = MATMUL_TILES.filter((t) => tileFits(t, limits));
  if (fits.length === 0) {
    throw new Error(`matmul: no tile fits the device limits (workgroup storage ${limits.maxComputeWorkgroupStorageSize} B, ${limits.maxComputeInvocationsPerWorkgroup} invocations)`);
  }
  for (const t of fits) {
    const n = Math.ceil(M / t.BM) * Math.ceil(N / t.BN) * batch;
    if (n >= minWorkgroups) return t;
  }
  return fits[fits.length - 1]!;
}
