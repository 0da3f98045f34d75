/**
 * The MoE expert products on the tensor cores: the grouped modes of the cooperative-matrix matmul
 * (matmul-coop-wgsl.ts, CoopGroupedMode) as backend {@link Launch}es, for the webgpu backend's
 * `tensorCores` option — the same contract as the FMA grouped kernels (grouped-matmul.ts:
 * `Backend.groupedMatmulDev` and `Backend.groupedWeightGrad`, offsets on the device, row tiles
 * never straddling two groups as in CUTLASS's grouped GEMM and MegaBlocks), with the dense
 * tensor-core path's numerics (matmul-coop-launch.ts): each operand scaled by one power of two
 * (matmul-coop-scale.ts; one max-abs dispatch over the elements the product uses — every expert's
 * weights together, without the gaps between them, and only the rows between the smallest and the
 * largest offset — then the kernel), rounded to f16 when staged, f32 accumulation, result scaled
 * back exactly, out f32. One scale for all experts (and all groups' rows): values below 2^−28 of
 * the operand's largest finite |x| — e.g. an expert whose weights are that much smaller than
 * another's — become f16 subnormals (fewer bits; below ~2^−39 zero), as within one dense operand;
 * NaN and ±inf are left out of the maxima and stay in their own group's results.
 */
import type { Buf } from "../backend.ts";
import type { GroupedDevGeometry, GroupedWGradGeometry } from "../grouped-matmul-spec.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { bindTypeOf, memoKernel, u32s } from "./launch.ts";
import { COOP_LAUNCH_DEFAULT, COOP_SCRATCH, coopFittingTiles, coopKernel, coopPackedOptions, coopPackOperand, type CoopLaunchConfig, type CoopScratch } from "./matmul-coop-launch.ts";
import { COOP_AMAX_PARTIALS, COOP_AMAX_WORDS, coopAbsMaxRangeFold, coopAbsMaxSlicesLoop, coopAbsMaxWGSL } from "./matmul-coop-scale.ts";
import type { CoopMatmulOptions } from "./matmul-coop-wgsl.ts";
import { coopPackGeometry } from "./matmul-coop-pack.ts";
import { planCoopMatmul } from "./matmul-coop-plan.ts";

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

/** Uniform parameters of the grouped max-abs kernels ({@link groupedAbsMaxKernel}), in order. */
const GROUPED_AMAX_PARAM_NAMES = ["a_off", "a_row", "b_off", "b_row", "b_size", "stride_b", "G", "R", "off_off"] as const;

/**
 * The max-abs dispatch of a grouped product (the partial maxima of matmul-coop-scale.ts's
 * coopAbsMaxLaunch: f32 bit patterns of the largest finite |x|, A's in amax[0..256), B's in
 * amax[256..512)) over only the elements the product can use. A is always a row operand: rows
 * [lo, hi) of `a_row` elements from a_off, lo and hi the smallest and largest of the G + 1 offsets
 * after clamping to [0, R] (for non-decreasing offsets [offsets[0], offsets[G]); every group's rows
 * lie inside for any offsets). B: "rows" — the G weight matrices of `b_size` elements at b_off +
 * g·stride_b (the gaps are not read); "wgrad" — rows [lo, hi) of `b_row` elements, like A.
 * Workgroups 256 × 2 (y: the operand). Every read is in range: rows below R, weights inside the
 * extent the backend checked.
 */
function groupedAbsMaxKernel(mode: "rows" | "wgrad", da: FloatDType = "f32", db: FloatDType = "f32"): Kernel {
  const label = `coop_absmax_grp${mode}${da === "f32" && db === "f32" ? "" : `_${da}_${db}`}`;
  const rowLoop = (buf: string, p: string, dt: FloatDType) => coopAbsMaxRangeFold(buf, `P.${p}_off`, `lo * P.${p}_row`, `hi * P.${p}_row`, dt);
  const bLoop = mode === "wgrad" ? rowLoop("b_b", "b", db) : coopAbsMaxSlicesLoop("b_b", "P.b_off", "P.b_size", "P.stride_b", "P.G", db);
  const helpers = "fn grp_off(g: u32) -> u32 { return min(u32(max(b_off[P.off_off + g], 0)), P.R); }\n";
  const prologue = `  var lo = P.R;
  var hi = 0u;
  for (var g = 0u; g <= P.G; g++) { let o = grp_off(g); lo = min(lo, o); hi = max(hi, o); }
`;
  return memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_a", type: bindTypeOf(da), write: false },
      { name: "b_b", type: bindTypeOf(db), write: false },
      { name: "b_amax", type: "u32", write: true },
      { name: "b_off", type: "i32", write: false },
    ],
    params: u32s(...GROUPED_AMAX_PARAM_NAMES),
    code: coopAbsMaxWGSL(rowLoop("b_a", "a", da), bLoop, helpers, prologue),
  }));
}

type FloatDType = "f32" | "f16" | "bf16";

/** Checks of a grouped product's buffers: operands f32 (or f16/bf16 with packed operands), out
 * f32, offsets i32, amax u32 of ≥ COOP_AMAX_WORDS. Returns the operands' dtypes. */
function checkBufs(who: string, x: Buf, w: Buf, out: Buf, amax: Buf, off: Buf, packed: boolean): [FloatDType, FloatDType] {
  const ok = (d: string): d is FloatDType => d === "f32" || (packed && (d === "f16" || d === "bf16"));
  if (!ok(x.dtype) || !ok(w.dtype) || out.dtype !== "f32") throw new Error(`webgpu tensor-core ${who}: operands must be ${packed ? "f32, f16 or bf16" : "f32"} and out f32, got ${x.dtype}/${w.dtype}/${out.dtype}`);
  if (off.dtype !== "i32") throw new Error(`webgpu tensor-core ${who}: offsets must be i32, got ${off.dtype}`);
  if (amax.dtype !== "u32" || amax.length < COOP_AMAX_WORDS) throw new Error(`webgpu tensor-core ${who}: amax must be a u32 buffer of at least ${COOP_AMAX_WORDS} elements, got ${amax.dtype}[${amax.length}]`);
  return [x.dtype, w.dtype];
}

/**
 * {@link Backend.groupedMatmulDev} on the tensor cores: out[rows_g] (+)= x[rows_g]·op(w_g) for every
 * group, x [R, K] at xoff, w_g at woff + g·strideW ([K, N], or [N, K] with transB), out [R, N] at
 * ooff, G + 1 i32 offsets at offoff of `off` (element offsets). Packed operands (default): the
 * max-abs of x's rows between the offsets and of every w_g ({@link groupedAbsMaxKernel}; skipped
 * when both are f16), a pack of x (R rows + one block of zero rows, K padded to BK) and of the G
 * weight matrices (padded to BK × BN) into f16 scratches, then the kernel over ⌈R/BM⌉ + G row-tile
 * slots × ⌈N/BN⌉ with the plan's block (no split-K). "f32" operands: the max-abs, then the
 * in-register kernel on x and w. Returns [] when nothing is computed (G, R or N = 0). Rows outside
 * [offsets[0], offsets[G]) are not touched.
 * @throws Error unless x, w are f32 (or f16/bf16, packed) and out f32, off i32 and the amax scratch
 *   u32 of ≥ COOP_AMAX_WORDS elements, or when the grid needs more than 65535 workgroups in a
 *   dimension.
 */
export function groupedCoopDevLaunches(x: Buf, xoff: number, w: Buf, woff: number, off: Buf, offoff: number, out: Buf, ooff: number, g: GroupedDevGeometry, scratch: CoopScratch, cfg: CoopLaunchConfig = COOP_LAUNCH_DEFAULT): Launch[] {
  const packed = (cfg.operands ?? "packed") === "packed";
  const amax = scratch(COOP_SCRATCH.amax, "u32", COOP_AMAX_WORDS);
  const [dx, dw] = checkBufs("groupedMatmulDev", x, w, out, amax, off, packed);
  if (g.G === 0 || g.R === 0 || g.N === 0) return [];
  const tile = packed ? planCoopMatmul(g.R, g.N, g.K, 1, coopFittingTiles(cfg, { transA: false, transB: g.transB, epilogue: "scratch", staging: cfg.staging }), undefined, false).tile : cfg.tile;
  const wg: [number, number, number] = [Math.ceil(g.N / tile.BN), Math.ceil(g.R / tile.BM) + g.G, 1];
  if (wg.some((v) => v > 65535)) throw new Error(`webgpu tensor-core groupedMatmulDev: grid ${wg} exceeds 65535 workgroups per dimension`);
  const absmax: Launch = { kernel: groupedAbsMaxKernel("rows", dx, dw), bufs: [x, w, amax, off], params: [xoff, g.K, woff, 0, g.N * g.K, g.strideW, g.G, g.R, offoff], workgroups: [COOP_AMAX_PARTIALS, 2, 1] };
  if (!packed) {
    const o: CoopMatmulOptions = { input: "f32", transA: false, transB: g.transB, accumulate: g.accumulate, mode: "kernel", vec: 1, scaled: true, tile, emulate: cfg.emulate, grouped: "rows" };
    // params: M (unused), N, K, offsets of x/w/out, strides (A unused; w per group; out unused), batch 1, then G, R, off_off
    const params = [0, g.N, g.K, xoff, woff, ooff, 0, g.strideW, 0, 1, g.G, g.R, offoff];
    return [absmax, { kernel: coopKernel(o), bufs: [x, w, out, amax, off], params, workgroups: wg }];
  }
  const launches: Launch[] = dx === "f16" && dw === "f16" ? [] : [absmax];
  const gA = coopPackGeometry(xoff, g.R, g.K, g.K, 0, 1, 1, tile.BK, tile.BM);
  const gB = g.transB ? coopPackGeometry(woff, g.N, g.K, g.K, g.strideW, g.G, tile.BN, tile.BK) : coopPackGeometry(woff, g.K, g.N, g.N, g.strideW, g.G, tile.BK, tile.BN);
  const pa = coopPackOperand(x, gA, scratch, COOP_SCRATCH.packA, amax, 0);
  const pb = coopPackOperand(w, gB, scratch, COOP_SCRATCH.packB, amax, 1);
  for (const p of [pa, pb]) if (p.launch) launches.push(p.launch);
  const o: CoopMatmulOptions = { ...coopPackedOptions(cfg), transA: false, transB: g.transB, accumulate: g.accumulate, tile, grouped: "rows" };
  const params = [0, g.N, g.K, 0, 0, ooff, 0, gB.dstStride, 0, 1, g.G, g.R, offoff, gA.dstLd, gB.dstLd, (pa.scaled ? 1 : 0) | (pb.scaled ? 2 : 0)];
  launches.push({ kernel: coopKernel(o), bufs: [pa.dst, pb.dst, out, amax, off], params, workgroups: wg });
  return launches;
}

/**
 * {@link Backend.groupedWeightGrad} on the tensor cores: dw_g (+)= dy[rows_g]ᵀ·x[rows_g] for every
 * group, dy [R, M] at dyoff, x [R, N] at xoff, dw_g [M, N] at dwoff + g·strideW, G + 1 i32
 * offsets at offoff of `off`. The max-abs of dy's and x's rows between the offsets
 * ({@link groupedAbsMaxKernel}); packed operands (default): dy and x packed (rows as they are,
 * columns padded to the block) into f16 scratches, then the kernel ("regs" staging whatever
 * `cfg.staging` says: K runs over each group's rows) over ⌈N/BN⌉ × ⌈M/BM⌉ × G workgroups, each
 * running its K loop over the group's rows, with the plan's block. An empty group writes zeros (or
 * leaves dw_g unchanged when accumulating). Returns [] when dw is empty (G, M or N = 0).
 * @throws as {@link groupedCoopDevLaunches}.
 */
export function groupedCoopWGradLaunches(dy: Buf, dyoff: number, x: Buf, xoff: number, off: Buf, offoff: number, dw: Buf, dwoff: number, g: GroupedWGradGeometry, scratch: CoopScratch, cfg: CoopLaunchConfig = COOP_LAUNCH_DEFAULT): Launch[] {
  const packed = (cfg.operands ?? "packed") === "packed";
  const amax = scratch(COOP_SCRATCH.amax, "u32", COOP_AMAX_WORDS);
  const [ddy, dx] = checkBufs("groupedWeightGrad", dy, x, dw, amax, off, packed);
  if (g.G === 0 || g.M === 0 || g.N === 0) return [];
  const tile = packed ? planCoopMatmul(g.M, g.N, Math.ceil(g.R / g.G), g.G, coopFittingTiles(cfg, { transA: true, transB: false, epilogue: "scratch", staging: "regs" }), undefined, false).tile : cfg.tile;
  const wg: [number, number, number] = [Math.ceil(g.N / tile.BN), Math.ceil(g.M / tile.BM), g.G];
  if (wg.some((v) => v > 65535)) throw new Error(`webgpu tensor-core groupedWeightGrad: grid ${wg} exceeds 65535 workgroups per dimension`);
  const absmax: Launch = { kernel: groupedAbsMaxKernel("wgrad", ddy, dx), bufs: [dy, x, amax, off], params: [dyoff, g.M, xoff, g.N, 0, 0, g.G, g.R, offoff], workgroups: [COOP_AMAX_PARTIALS, 2, 1] };
  if (!packed) {
    const o: CoopMatmulOptions = { input: "f32", transA: true, transB: false, accumulate: g.accumulate, mode: "kernel", vec: 1, scaled: true, tile, emulate: cfg.emulate, grouped: "wgrad" };
    // params: M, N, K (unused: per group), offsets of dy/x/dw, strides (dw per group), batch G, then G, R, off_off
    const params = [g.M, g.N, 0, dyoff, xoff, dwoff, 0, 0, g.strideW, g.G, g.G, g.R, offoff];
    return [absmax, { kernel: coopKernel(o), bufs: [dy, x, dw, amax, off], params, workgroups: wg }];
  }
  const launches: Launch[] = ddy === "f16" && dx === "f16" ? [] : [absmax];
  const gA = coopPackGeometry(dyoff, g.R, g.M, g.M, 0, 1, 1, tile.BM);
  const gB = coopPackGeometry(xoff, g.R, g.N, g.N, 0, 1, 1, tile.BN);
  const pa = coopPackOperand(dy, gA, scratch, COOP_SCRATCH.packA, amax, 0);
  const pb = coopPackOperand(x, gB, scratch, COOP_SCRATCH.packB, amax, 1);
  for (const p of [pa, pb]) if (p.launch) launches.push(p.launch);
  const o: CoopMatmulOptions = { ...coopPackedOptions(cfg, "regs"), transA: true, transB: false, accumulate: g.accumulate, tile, grouped: "wgrad" };
  const params = [g.M, g.N, 0, 0, 0, dwoff, 0, 0, g.strideW, g.G, g.G, g.R, offoff, gA.dstLd, gB.dstLd, (pa.scaled ? 1 : 0) | (pb.scaled ? 2 : 0)];
  launches.push({ kernel: coopKernel(o), bufs: [pa.dst, pb.dst, dw, amax, off], params, workgroups: wg });
  return launches;
}
