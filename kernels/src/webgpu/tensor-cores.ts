/**
 * The webgpu backend's tensor-core options (`tensorCores`, `tensorCoreTile`, `tensorCoreMinBlocks`
 * of WebGpuBackendOptions) resolved against an adapter and its device: whether the cooperative-
 * matrix kernels run, with which block, above which size, and the status line the backend reports.
 */
import type { WebGpuBackendOptions } from "./backend.ts";
import { COOP_MIN_BLOCKS, type CoopLaunchConfig } from "../wgsl/matmul-coop-launch.ts";
import { COOP_DEFAULT_TILE, type CoopTile, coopTileName, coopTileProblem, coopTileThreads, parseCoopTile } from "../wgsl/matmul-coop-tile.ts";
import { coopWorkgroupBytes, type CoopStaging } from "../wgsl/matmul-coop-wgsl.ts";
import { coopSupport } from "../wgsl/matmul-coop.ts";

/** The tensor-core block the backend prefers: 128×256×32 on 16 subgroups, one stage — the fastest
 * block measured on the H200 at 4096³ and at the mixtral-med step shapes (docs/performance.md,
 * "Tensor cores"), 46 KiB of workgroup memory and 512 invocations. */
export const DEFAULT_TENSOR_CORE_TILE: CoopTile = parseCoopTile("128x256x32-4x4-s1");

/** Block of the emulated tensor-core kernels where the default one exceeds the device's workgroup
 * memory (lavapipe: 32 KiB). */
const EMULATED_SMALL_TILE = parseCoopTile("64x64x32-2x2-s1");

/** The other blocks the per-problem rule may choose (wgsl/matmul-coop-plan.ts) where the device
 * admits them: 256×128 on 16 subgroups, and 128×128 on 8 (two stages) for grids the large blocks
 * leave short. */
export const TENSOR_CORE_CANDIDATE_TILES: readonly CoopTile[] = [parseCoopTile("256x128x32-8x2-s1"), COOP_DEFAULT_TILE];

/** WebGpuBackendOptions.tensorCoreVariant: see there. */
export interface TensorCoreVariant {
  operands?: "packed" | "f32";
  staging?: CoopStaging;
  vec?: 4 | 8;
  /** How 16-byte loads are typed: "u32" (default) or "mat2x4" (no per-half conversions;
   * wgsl/matmul-coop-wgsl.ts CoopMatmulOptions.vec8Type). */
  vec8Type?: "u32" | "mat2x4";
  splitK?: number;
  /** Epilogue of the packed dense products: "scratch" (default) or "auto" (direct coopStoreT into
   * out where M, N are multiples of 16; wgsl/matmul-coop-launch.ts CoopLaunchConfig.epilogue). */
  epilogue?: "scratch" | "auto";
}

/** The options this file reads (their meaning: WebGpuBackendOptions). */
export type TensorCoreOptions = Pick<WebGpuBackendOptions, "tensorCores" | "tensorCoreMinBlocks" | "tensorCoreTile" | "tensorCoreVariant">;

/** Why a variant cannot be used, or "". */
function variantProblem(v: TensorCoreVariant): string {
  for (const k of Object.keys(v)) if (!["operands", "staging", "vec", "vec8Type", "splitK", "epilogue"].includes(k)) return `unknown key ${k} (expected operands, staging, vec, vec8Type, splitK, epilogue)`;
  if (v.vec8Type !== undefined && v.vec8Type !== "u32" && v.vec8Type !== "mat2x4") return `vec8Type must be "u32" or "mat2x4", got ${v.vec8Type}`;
  if (v.epilogue !== undefined && v.epilogue !== "scratch" && v.epilogue !== "auto") return `epilogue must be "scratch" or "auto", got ${v.epilogue}`;
  if (v.operands !== undefined && v.operands !== "packed" && v.operands !== "f32") return `operands must be "packed" or "f32", got ${v.operands}`;
  if (v.staging !== undefined && !["regs", "coop", "none"].includes(v.staging)) return `staging must be "regs", "coop" or "none", got ${v.staging}`;
  if (v.vec !== undefined && v.vec !== 4 && v.vec !== 8) return `vec must be 4 or 8, got ${v.vec}`;
  if (v.splitK !== undefined && !(Number.isInteger(v.splitK) && v.splitK >= 1)) return `splitK must be an integer ≥ 1, got ${v.splitK}`;
  if (v.operands === "f32" && (v.staging !== undefined || v.vec !== undefined || v.vec8Type !== undefined || v.splitK !== undefined || v.epilogue !== undefined)) return `staging, vec, vec8Type, splitK and epilogue apply to packed operands only`;
  return "";
}

/** The resolved choice: `coop` null when the tensor-core kernels do not run. */
export interface TensorCoreSetup {
  coop: { launch: CoopLaunchConfig; minBlocks: number } | null;
  /** For WebGpuBackend.tensorCoresStatus. */
  status: string;
}

/** Whether every layout of the scaled tensor-core kernel with `tile` and `epilogue` fits `device`'s
 * limits. */
function fitsDevice(device: GPUDevice, tile: CoopTile, epilogue: "scratch" | "direct" = "scratch"): boolean {
  const l = device.limits;
  if (coopTileThreads(tile) > Math.min(l.maxComputeInvocationsPerWorkgroup, l.maxComputeWorkgroupSizeX)) return false;
  return [false, true].every((transA) => [false, true].every((transB) => coopWorkgroupBytes({ transA, transB, tile, scaled: true, epilogue }) <= l.maxComputeWorkgroupStorageSize));
}

/**
 * Resolve the tensor-core options for `device` (opened on `adapter`). `tensorCores` true or "auto":
 * the real kernels where {@link coopSupport} passes, the device has the feature and a block fits
 * (`tensorCoreTile`, else {@link DEFAULT_TENSOR_CORE_TILE}, else COOP_DEFAULT_TILE); "auto" is off
 * otherwise, naming why. "emulated": the plain-WGSL kernels, needing shader-f16 and a block that
 * fits (default COOP_DEFAULT_TILE, else 64×64×32).
 * @throws Error naming the option: tensorCoreMinBlocks not an integer ≥ 0; tensorCoreMinBlocks or
 *   tensorCoreTile without tensorCores; a malformed tile or one beyond the device's limits;
 *   "emulated" without shader-f16 or room; `true` where the tensor cores are unavailable.
 */
export function resolveTensorCores(adapter: GPUAdapter, device: GPUDevice, opts: TensorCoreOptions): TensorCoreSetup {
  const minBlocks = opts.tensorCoreMinBlocks ?? COOP_MIN_BLOCKS;
  if (opts.tensorCoreMinBlocks !== undefined && !opts.tensorCores) throw new Error(`webgpu: tensorCoreMinBlocks needs tensorCores (true, "auto" or "emulated"), got ${opts.tensorCores}`);
  if (!(Number.isInteger(minBlocks) && minBlocks >= 0)) throw new Error(`webgpu: tensorCoreMinBlocks must be an integer ≥ 0, got ${minBlocks}`);
  const variant = opts.tensorCoreVariant;
  if (variant) {
    const problem = variantProblem(variant) || (opts.tensorCores ? "" : `needs tensorCores (true, "auto" or "emulated"), got ${opts.tensorCores}`);
    if (problem) throw new Error(`webgpu: tensorCoreVariant: ${problem}`);
  }
  const v = variant ?? {};
  const launch = (tile: CoopTile, emulate: boolean): CoopLaunchConfig => {
    const others = given || emulate ? [] : TENSOR_CORE_CANDIDATE_TILES.filter((t) => coopTileName(t) !== coopTileName(tile) && fitsDevice(device, t));
    return { tile, candidates: [tile, ...others], emulate, operands: v.operands, staging: v.staging, vec: v.vec, vec8Type: v.vec8Type, splitK: v.splitK, epilogue: v.epilogue, workgroupBytes: device.limits.maxComputeWorkgroupStorageSize };
  };
  const given = opts.tensorCoreTile;
  if (given) {
    const problem = coopTileProblem(given) || (opts.tensorCores ? "" : `needs tensorCores (true, "auto" or "emulated"), got ${opts.tensorCores}`);
    if (problem) throw new Error(`webgpu: tensorCoreTile ${coopTileName(given)}: ${problem}`);
    // with the direct epilogue a forced block need only fit without the scratch; calls whose layout
    // or epilogue it does not fit take the default block (matmul-coop-launch.ts coopFittingTiles)
    const fits = fitsDevice(device, given) || (v.epilogue === "auto" && (v.operands ?? "packed") === "packed" && fitsDevice(device, given, "direct"));
    if (!fits) throw new Error(`webgpu: tensorCoreTile ${coopTileName(given)} exceeds this device's workgroup limits${v.epilogue === "auto" ? "" : " (with the scratch epilogue; tensorCoreVariant.epilogue 'auto' needs less)"}`);
  }
  if (!opts.tensorCores) return { coop: null, status: "off (not requested)" };
  if (opts.tensorCores === "emulated") {
    const tile = given ?? (fitsDevice(device, COOP_DEFAULT_TILE) ? COOP_DEFAULT_TILE : EMULATED_SMALL_TILE);
    const f16 = device.features.has("shader-f16");
    if (!f16 || !(fitsDevice(device, tile) || (given && v.epilogue === "auto" && fitsDevice(device, tile, "direct")))) {
      throw new Error(`webgpu: tensorCores "emulated" needs shader-f16 and ${coopWorkgroupBytes({ transA: false, transB: false, tile, scaled: true })} bytes of workgroup memory; the device has ${f16 ? "" : "no shader-f16 and "}${device.limits.maxComputeWorkgroupStorageSize} bytes`);
    }
    return { coop: { launch: launch(tile, true), minBlocks }, status: `emulated (the tensor-core kernels with plain-WGSL cooperative matrices, block ${coopTileName(tile)}; for tests)` };
  }
  const s = coopSupport(adapter);
  const tile = given ?? (fitsDevice(device, DEFAULT_TENSOR_CORE_TILE) ? DEFAULT_TENSOR_CORE_TILE : COOP_DEFAULT_TILE);
  const why = !s.ok ? s.reason
    : !device.features.has("wgpu-cooperative-matrix" as GPUFeatureName) ? "the device was created without 'wgpu-cooperative-matrix'"
    : !fitsDevice(device, tile) ? `neither tensor-core block (${coopTileName(DEFAULT_TENSOR_CORE_TILE)}, ${coopTileName(COOP_DEFAULT_TILE)}) fits this device's workgroup limits`
    : "";
  if (why && opts.tensorCores === true) throw new Error(`webgpu: tensorCores requested but ${why}`);
  if (why) return { coop: null, status: `off (${why})` };
  const cfg = launch(tile, false);
  return { coop: { launch: cfg, minBlocks }, status: `on (f32 matmuls and MoE grouped products with enough output blocks run on the cooperative-matrix kernels, blocks ${cfg.candidates!.map(coopTileName).join(", ")} chosen per problem, operands scaled by powers of two and ${(v.operands ?? "packed") === "packed" ? `packed as f16, staging ${v.staging ?? "regs"}` : "rounded to f16 in registers"})` };
}
