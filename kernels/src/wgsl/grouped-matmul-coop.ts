/**
 * The MoE expert products on the tensor cores: the grouped modes of the cooperative-matrix matmul
 * (matmul-coop-wgsl.ts, CoopGroupedMode) as backend {@link Launch}es, for the webgpu backend's
 * `tensorCores` option — the same contract as the FMA grouped kernels (grouped-matmul.ts:
 * `Backend.groupedMatmulDev` and `Backend.groupedWeightGrad`, offsets on the device, row tiles
 * never straddling two groups as in CUTLASS's grouped GEMM and MegaBlocks), with the dense
 * tensor-core path's numerics (matmul-coop-launch.ts): each operand scaled by one power of two
 * (matmul-coop-scale.ts; one max-abs dispatch over the whole operand — every expert's weights
 * together — then the kernel), rounded to f16 when staged, f32 accumulation, result scaled back
 * exactly, out f32.
 */
import type { Buf } from "../backend.ts";
import type { GroupedDevGeometry, GroupedWGradGeometry } from "../grouped-matmul-spec.ts";
import type { Launch } from "../webgpu/kernel.ts";
import { COOP_LAUNCH_DEFAULT, coopKernel, type CoopLaunchConfig } from "./matmul-coop-launch.ts";
import { coopAbsMaxLaunch, COOP_AMAX_WORDS } from "./matmul-coop-scale.ts";
import type { CoopMatmulOptions } from "./matmul-coop-wgsl.ts";

/** 128×128 output blocks of a grouped forward / dX with `g` (⌈R/128⌉ · ⌈N/128⌉: the blocks the
 * rows need, not the slots the grid carries), for the backend's choice between the tensor-core and
 * the FMA kernel (matmul-coop-launch.ts COOP_MIN_BLOCKS). */
export function groupedCoopDevBlocks(g: GroupedDevGeometry): number {
  return Math.ceil(g.R / 128) * Math.ceil(g.N / 128);
}

/** 128×128 output blocks of a grouped weight gradient with `g` (⌈M/128⌉ · ⌈N/128⌉ · G). */
export function groupedCoopWGradBlocks(g: GroupedWGradGeometry): number {
  return Math.ceil(g.M / 128) * Math.ceil(g.N / 128) * g.G;
}

function checkBufs(who: string, bufs: Buf[], amax: Buf, off: Buf): void {
  if (bufs.some((b) => b.dtype !== "f32")) throw new Error(`webgpu tensor-core ${who}: operands and out must be f32, got ${bufs.map((b) => b.dtype).join("/")}`);
  if (off.dtype !== "i32") throw new Error(`webgpu tensor-core ${who}: offsets must be i32, got ${off.dtype}`);
  if (amax.dtype !== "u32" || amax.length < COOP_AMAX_WORDS) throw new Error(`webgpu tensor-core ${who}: amax must be a u32 buffer of at least ${COOP_AMAX_WORDS} elements, got ${amax.dtype}[${amax.length}]`);
}

/**
 * {@link Backend.groupedMatmulDev} on the tensor cores: out[rows_g] (+)= x[rows_g]·op(w_g) for every
 * group, x [R, K] at xoff, w_g at woff + g·strideW ([K, N], or [N, K] with transB), out [R, N] at
 * ooff, G + 1 i32 offsets at offoff of `off` (element offsets). Two launches: the max-abs of x and
 * of every w_g, then the kernel over ⌈R/BM⌉ + G row-tile slots × ⌈N/BN⌉. Returns [] when nothing
 * is computed (G, R or N = 0). Rows outside [offsets[0], offsets[G]) are not touched.
 * @throws Error unless x, w, out are f32, off i32 and amax u32 of ≥ COOP_AMAX_WORDS elements, or
 *   when the grid needs more than 65535 workgroups in a dimension.
 */
export function groupedCoopDevLaunches(x: Buf, xoff: number, w: Buf, woff: number, off: Buf, offoff: number, out: Buf, ooff: number, g: GroupedDevGeometry, amax: Buf, cfg: CoopLaunchConfig = COOP_LAUNCH_DEFAULT): Launch[] {
  checkBufs("groupedMatmulDev", [x, w, out], amax, off);
  if (g.G === 0 || g.R === 0 || g.N === 0) return [];
  const { tile } = cfg;
  const wg: [number, number, number] = [Math.ceil(g.N / tile.BN), Math.ceil(g.R / tile.BM) + g.G, 1];
  if (wg.some((v) => v > 65535)) throw new Error(`webgpu tensor-core groupedMatmulDev: grid ${wg} exceeds 65535 workgroups per dimension`);
  const o: CoopMatmulOptions = { input: "f32", transA: false, transB: g.transB, accumulate: g.accumulate, mode: "kernel", vec: 1, scaled: true, tile, emulate: cfg.emulate, grouped: "rows" };
  const wElems = g.N * g.K === 0 ? 0 : (g.G - 1) * g.strideW + g.N * g.K;
  // params: M (unused), N, K, offsets of x/w/out, strides (A unused; w per group; out unused), batch 1, then G, R, off_off
  const params = [0, g.N, g.K, xoff, woff, ooff, 0, g.strideW, 0, 1, g.G, g.R, offoff];
  return [
    coopAbsMaxLaunch(x, xoff, g.R * g.K, 0, w, woff, wElems, 0, 1, amax),
    { kernel: coopKernel(o), bufs: [x, w, out, amax, off], params, workgroups: wg },
  ];
}

/**
 * {@link Backend.groupedWeightGrad} on the tensor cores: dw_g (+)= dy[rows_g]ᵀ·x[rows_g] for every
 * group, dy [R, M] at dyoff, x [R, N] at xoff, dw_g [M, N] at dwoff + g·strideW, G + 1 i32
 * offsets at offoff of `off`. Two launches: the max-abs of dy and of x, then the kernel over
 * ⌈N/BN⌉ × ⌈M/BM⌉ × G workgroups, each running its K loop over the group's rows. An empty group
 * writes zeros (or leaves dw_g unchanged when accumulating). Returns [] when dw is empty (G, M or
 * N = 0).
 * @throws as {@link groupedCoopDevLaunches}.
 */
export function groupedCoopWGradLaunches(dy: Buf, dyoff: number, x: Buf, xoff: number, off: Buf, offoff: number, dw: Buf, dwoff: number, g: GroupedWGradGeometry, amax: Buf, cfg: CoopLaunchConfig = COOP_LAUNCH_DEFAULT): Launch[] {
  checkBufs("groupedWeightGrad", [dy, x, dw], amax, off);
  if (g.G === 0 || g.M === 0 || g.N === 0) return [];
  const { tile } = cfg;
  const wg: [number, number, number] = [Math.ceil(g.N / tile.BN), Math.ceil(g.M / tile.BM), g.G];
  if (wg.some((v) => v > 65535)) throw new Error(`webgpu tensor-core groupedWeightGrad: grid ${wg} exceeds 65535 workgroups per dimension`);
  const o: CoopMatmulOptions = { input: "f32", transA: true, transB: false, accumulate: g.accumulate, mode: "kernel", vec: 1, scaled: true, tile, emulate: cfg.emulate, grouped: "wgrad" };
  // params: M, N, K (unused: per group), offsets of dy/x/dw, strides (dw per group), batch G, then G, R, off_off
  const params = [g.M, g.N, 0, dyoff, xoff, dwoff, 0, 0, g.strideW, g.G, g.G, g.R, offoff];
  return [
    coopAbsMaxLaunch(dy, dyoff, g.R * g.M, 0, x, xoff, g.R * g.N, 0, 1, amax),
    { kernel: coopKernel(o), bufs: [dy, x, dw, amax, off], params, workgroups: wg },
  ];
}
