/**
 * The tensor-core matmul (matmul-coop-wgsl.ts, "kernel" mode) as backend {@link Launch}es, for the
 * webgpu backend's `tensorCores` option: f32 operands are scaled by a power of two each
 * (matmul-coop-scale.ts: one max-abs dispatch, then the kernel) and rounded to f16 when staged,
 * products accumulate in f32, the result is scaled back exactly, out is f32.
 */
import type { Buf, MatmulSpec } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { memoKernel, u32s } from "./launch.ts";
import { COOP_GROUPED_PARAM_NAMES, COOP_PARAM_NAMES, coopKernelKey, matmulCoopWGSL, type CoopMatmulOptions } from "./matmul-coop-wgsl.ts";
import { COOP_DEFAULT_TILE, type CoopTile } from "./matmul-coop-tile.ts";
import { coopAbsMaxLaunch } from "./matmul-coop-scale.ts";

/** Fewest 128×128 output blocks for which the tensor-core kernel is used; below it the FMA path
 * (with split-K) is faster. Measured on the H200 (132 SMs): the Aᵀ·B weight gradients of
 * mixtral-med with 16–64 blocks and K = 8192 ran at 13–32 TFLOP/s on tensor cores, below the FMA
 * split-K kernel; shapes with ≥ 128 blocks ran at 62–112 (docs/performance.md). */
export const COOP_MIN_BLOCKS = 96;

/**
 * The backend Kernel of a "kernel"-mode variant (f32 operands): buffers b_a, b_b, b_out, then
 * b_amax (u32) when scaled and b_off (i32 row offsets) when grouped; params
 * {@link COOP_PARAM_NAMES}, then {@link COOP_GROUPED_PARAM_NAMES} when grouped.
 */
export function coopKernel(o: CoopMatmulOptions): Kernel {
  const label = coopKernelKey(o);
  return memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_a", type: "f32", write: false },
      { name: "b_b", type: "f32", write: false },
      { name: "b_out", type: "f32", write: true },
      ...(o.scaled ? [{ name: "b_amax", type: "u32" as const, write: false }] : []),
      ...(o.grouped ? [{ name: "b_off", type: "i32" as const, write: false }] : []),
    ],
    params: u32s(...COOP_PARAM_NAMES, ...(o.grouped ? COOP_GROUPED_PARAM_NAMES : [])),
    code: matmulCoopWGSL(o),
  }));
}

/** Output blocks of the tensor-core kernel for `spec` with `tile` (ceil(M/BM)·ceil(N/BN)·batch). */
export function coopBlocks(spec: MatmulSpec, tile: CoopTile = COOP_DEFAULT_TILE): number {
  return Math.ceil(spec.M / tile.BM) * Math.ceil(spec.N / tile.BN) * (spec.batch ?? 1);
}

/** How the backend runs the tensor-core kernels: block shape, and whether the cooperative-matrix
 * builtins are emulated in plain WGSL (tests on devices without them; matmul-coop-wgsl.ts). */
export interface CoopLaunchConfig {
  tile: CoopTile;
  emulate: boolean;
}

/** The default block, real cooperative matrices. */
export const COOP_LAUNCH_DEFAULT: CoopLaunchConfig = { tile: COOP_DEFAULT_TILE, emulate: false };

/**
 * One tensor-core matmul `out[b] (+)= op(a[b])·op(b[b])` (see {@link MatmulSpec}; element offsets
 * aoff/boff/ooff; default batch strides are the packed sizes). Returns [] when M, N or batch is 0.
 * With `amax` (a u32 scratch of ≥ COOP_AMAX_WORDS elements) two launches: the max-abs reduction of
 * both operands, then the scaled kernel (matmul-coop-scale.ts); with `amax` null one unscaled
 * launch (operands rounded to f16 as they are: values below 6.1e-5 lose precision, above 65504
 * become inf).
 * @throws Error unless a, b, out are f32 buffers (and amax u32 of ≥ COOP_AMAX_WORDS), or when a
 *   dimension needs more than 65535 workgroups.
 */
export function coopMatmulLaunches(a: Buf, aoff: number, b: Buf, boff: number, out: Buf, ooff: number, spec: MatmulSpec, amax: Buf | null, cfg: CoopLaunchConfig = COOP_LAUNCH_DEFAULT): Launch[] {
  if (a.dtype !== "f32" || b.dtype !== "f32" || out.dtype !== "f32") throw new Error(`webgpu tensor-core matmul: a, b, out must be f32, got ${a.dtype}/${b.dtype}/${out.dtype}`);
  const { M, N, K } = spec;
  const batch = spec.batch ?? 1;
  if (M === 0 || N === 0 || batch === 0) return [];
  const wg: [number, number, number] = [Math.ceil(N / cfg.tile.BN), Math.ceil(M / cfg.tile.BM), batch];
  if (wg.some((g) => g > 65535)) throw new Error(`webgpu tensor-core matmul: grid ${wg} exceeds 65535 workgroups per dimension`);
  const o: CoopMatmulOptions = { input: "f32", transA: !!spec.transA, transB: !!spec.transB, accumulate: !!spec.accumulate, mode: "kernel", vec: 1, scaled: amax !== null, tile: cfg.tile, emulate: cfg.emulate };
  const strideA = spec.strideA ?? M * K, strideB = spec.strideB ?? K * N;
  const params = [M, N, K, aoff, boff, ooff, strideA, strideB, spec.strideOut ?? M * N, batch];
  if (amax === null) return [{ kernel: coopKernel(o), bufs: [a, b, out], params, workgroups: wg }];
  // coopAbsMaxLaunch checks amax (u32, at least COOP_AMAX_WORDS elements)
  return [
    coopAbsMaxLaunch(a, aoff, M * K, strideA, b, boff, K * N, strideB, batch, amax),
    { kernel: coopKernel(o), bufs: [a, b, out, amax], params, workgroups: wg },
  ];
}
