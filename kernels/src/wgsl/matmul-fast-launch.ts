/**
 * The matmul as backend {@link Launch}es (the webgpu backend's matmul op calls this). The kernel is the register-blocked one of
 * matmul-fast-wgsl.ts in "kernel" binding mode (the backend assembles `P`, `b_a`, `b_b`, `b_out`);
 * those bindings are scalar arrays, so the kernel runs its scalar-load path (4 guarded scalar loads
 * per staged vec4), with all the blocking of the fast kernel.
 *
 * A may be f32 or f16 (then B must be f16 too: f16 storage, f32 accumulation); out is f32.
 */
import type { Buf, MatmulSpec } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { memoKernel, u32s } from "./launch.ts";
import { planMatmulFast } from "./matmul-fast.ts";
import { DEFAULT_MATMUL_LIMITS, type MatmulLimits } from "./matmul-fast-tiles.ts";
import { MATMUL_PARAM_NAMES, type MatmulTile, type MatmulVariant, matmulFastWGSL } from "./matmul-fast-wgsl.ts";

/** A forced kernel choice for {@link planMatmulFastLaunches} (tuning and tests): the tile and its
 * K-loop schedule ({@link MatmulVariant.prefetchDistance}, {@link MatmulVariant.unroll2}; both
 * default to the plain schedule). */
export interface MatmulForcedTile {
  tile: MatmulTile;
  prefetchDistance?: number;
  unroll2?: boolean;
}

function fastKernel(key: string, v: MatmulVariant): Kernel {
  const label = `${key}_k`;
  const w16 = v.storage === "f16";
  return memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_a", type: w16 ? "w16" : "f32", write: false },
      { name: "b_b", type: w16 ? "w16" : "f32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s(...MATMUL_PARAM_NAMES),
    code: matmulFastWGSL(v, "kernel"),
  }));
}

/**
 * Plans one matmul `out[b] (+)= op(a[b])·op(b[b])` (see {@link MatmulSpec}) with the fast kernel.
 * `aoff/boff/ooff` are element offsets. `maxPerDim` is the device's
 * maxComputeWorkgroupsPerDimension (at least 65535 on every WebGPU device; the grid is folded into
 * x·y below it); `limits` bound the tile choice (default: WebGPU's default limits, which admit
 * the 128×128×8 tile). Returns [] when there is nothing to compute (M, N or batch 0).
 * `force` replaces the planner's tile choice (it must fit `limits`); `ldk` is the row stride of the
 * operands whose rows run along K (see {@link MatmulFastOptions.ldk}; default K).
 * Throws when a/b/out dtypes are not f32/f32/f32 or f16/f16/f32, on invalid sizes, when a forced
 * tile does not fit, or when the output needs more than maxPerDim² workgroups.
 */
export function planMatmulFastLaunches(a: Buf, aoff: number, b: Buf, boff: number, out: Buf, ooff: number, spec: MatmulSpec, maxPerDim = 65535, limits: MatmulLimits = DEFAULT_MATMUL_LIMITS, force?: MatmulForcedTile, ldk?: number): Launch[] {
  const storage = a.dtype === "f16" && b.dtype === "f16" ? "f16" : a.dtype === "f32" && b.dtype === "f32" ? "f32" : null;
  if (storage === null || out.dtype !== "f32") {
    throw new Error(`webgpu matmul: a, b, out must be f32/f32/f32 or f16/f16/f32, got ${a.dtype}/${b.dtype}/${out.dtype}`);
  }
  if (maxPerDim < 65535) throw new Error(`webgpu matmul: maxPerDim must be ≥ 65535 (WebGPU's minimum), got ${maxPerDim}`);
  const plan = planMatmulFast(spec, aoff, boff, ooff, {
    storage, limits, scalarOnly: true, ...(ldk !== undefined ? { ldk } : {}),
    ...(force ? { tile: force.tile, prefetchDistance: force.prefetchDistance ?? 0, unroll2: force.unroll2 ?? false } : {}),
  });
  if (plan.workgroups[0] === 0) return [];
  const params = Array.from(plan.params.subarray(0, MATMUL_PARAM_NAMES.length));
  return [{ kernel: fastKernel(plan.key, plan.variant), bufs: [a, b, out], params, workgroups: plan.workgroups }];
}
