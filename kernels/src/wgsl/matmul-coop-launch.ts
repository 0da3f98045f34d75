/**
 * The tensor-core matmul (matmul-coop-wgsl.ts, "kernel" mode) as backend {@link Launch}es, for the
 * webgpu backend's `tensorCores` option. Default ("packed" operands): one max-abs dispatch over
 * both operands (matmul-coop-scale.ts; f16 operands are not scaled), one pack dispatch per operand
 * into a zero-padded f16 copy scaled by its power of two (matmul-coop-pack.ts), then the kernel on
 * the copies (16-byte vector loads, or fragment loads straight from them: `staging`) with the block
 * and split-K of matmul-coop-plan.ts; split-K adds a deterministic reduce. f32 accumulation, result
 * scaled back exactly, out f32. The older path ("f32" operands: scalar f32 loads scaled and rounded
 * in registers, the default block, no split) stays selectable for comparison.
 */
import type { Buf, DType, MatmulSpec } from "../backend.ts";
import type { BindType, Kernel, Launch } from "../webgpu/kernel.ts";
import { memoKernel, u32s } from "./launch.ts";
import { COOP_GROUPED_PARAM_NAMES, COOP_PACKED_PARAM_NAMES, COOP_PARAM_NAMES, coopKernelKey, coopWorkgroupBytes, matmulCoopWGSL, type CoopMatmulOptions, type CoopStaging } from "./matmul-coop-wgsl.ts";
import { coopDirectEpilogueOk } from "./matmul-coop.ts";
import { COOP_DEFAULT_TILE, type CoopTile } from "./matmul-coop-tile.ts";
import { COOP_AMAX_WORDS, coopAbsMaxLaunch } from "./matmul-coop-scale.ts";
import { coopPackGeometry, coopPackHalves, coopPackLaunch, type CoopPackGeometry } from "./matmul-coop-pack.ts";
import { COOP_SPLIT_K_MAX, planCoopMatmul, type CoopPlan } from "./matmul-coop-plan.ts";

/** Fewest 128×128 output blocks for which the tensor-core kernel is used; below it the FMA path
 * (with split-K) is faster. Measured on the H200 (132 SMs): the Aᵀ·B weight gradients of
 * mixtral-med with 16–64 blocks and K = 8192 ran at 13–32 TFLOP/s on tensor cores, below the FMA
 * split-K kernel; shapes with ≥ 128 blocks ran at 62–112 (docs/performance.md). */
export const COOP_MIN_BLOCKS = 96;

/** How a "kernel"-mode variant binds its operands: f32 arrays, or for packed f16 operands
 * vec4<f16> (vec 4), vec4<u32> (vec 8) or f16 ("coop" / "none" staging). */
function operandBind(o: CoopMatmulOptions): BindType {
  if (!o.packed) return "f32";
  if ((o.staging ?? "regs") !== "regs") return "f16";
  return o.vec === 8 ? (o.vec8Type === "mat2x4" ? "f16x8" : "u32x4") : "f16x4";
}

/**
 * The backend Kernel of a "kernel"-mode variant: buffers b_a, b_b (f32, or the packed f16 copies:
 * {@link operandBind}), b_out, then b_amax (u32) when scaled and b_off (i32 row offsets) when
 * grouped; params {@link COOP_PARAM_NAMES}, then {@link COOP_GROUPED_PARAM_NAMES} when grouped,
 * then {@link COOP_PACKED_PARAM_NAMES} when packed.
 */
export function coopKernel(o: CoopMatmulOptions): Kernel {
  const label = coopKernelKey(o);
  const ab = operandBind(o);
  return memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_a", type: ab, write: false },
      { name: "b_b", type: ab, write: false },
      { name: "b_out", type: "f32", write: true },
      ...(o.scaled ? [{ name: "b_amax", type: "u32" as const, write: false }] : []),
      ...(o.grouped ? [{ name: "b_off", type: "i32" as const, write: false }] : []),
    ],
    params: u32s(...COOP_PARAM_NAMES, ...(o.grouped ? COOP_GROUPED_PARAM_NAMES : []), ...(o.packed ? COOP_PACKED_PARAM_NAMES : [])),
    code: matmulCoopWGSL(o),
  }));
}

/** Output blocks of the tensor-core kernel for `spec` with `tile` (ceil(M/BM)·ceil(N/BN)·batch). */
export function coopBlocks(spec: MatmulSpec, tile: CoopTile = COOP_DEFAULT_TILE): number {
  return Math.ceil(spec.M / tile.BM) * Math.ceil(spec.N / tile.BN) * (spec.batch ?? 1);
}

/** The size the backend compares with tensorCoreMinBlocks for a dense product: its 128×128
 * output blocks (× batch), times the K chunks split-K can add with packed operands (batch 1:
 * K / 256 of them, at most 16) — so weight gradients with small outputs and long K
 * (1024×1024×8192: 64 blocks) take the tensor cores with split-K instead of the FMA path. */
export function coopWork(spec: MatmulSpec, cfg: CoopLaunchConfig): number {
  const blocks = coopBlocks(spec);
  if ((cfg.operands ?? "packed") !== "packed" || (spec.batch ?? 1) !== 1) return blocks;
  return blocks * Math.max(1, Math.min(COOP_SPLIT_K_MAX, Math.floor(spec.K / 256)));
}

/** How the backend runs the tensor-core kernels (webgpu/tensor-cores.ts resolves it). */
export interface CoopLaunchConfig {
  /** The block of the grouped products and of the "f32" operands path (and the one candidate when
   * the caller forced a block). */
  tile: CoopTile;
  /** Blocks the per-problem rule (matmul-coop-plan.ts) chooses among (default [tile]). */
  candidates?: readonly CoopTile[];
  /** Plain-WGSL cooperative matrices (tests on devices without them; matmul-coop-wgsl.ts). */
  emulate: boolean;
  /** "packed" (default): pack each operand into a scaled f16 copy first; "f32": the kernel reads
   * the f32 operands itself (scalar loads, in-register scaling; no split-K, block `tile`). */
  operands?: "packed" | "f32";
  /** How the packed operands reach the multiply (matmul-coop-wgsl.ts; default "regs"). The
   * grouped weight gradient always uses "regs" (its K runs over a group's rows). */
  staging?: CoopStaging;
  /** Vector width of the "regs" staging's loads of packed operands: 4 (8-byte) or 8 (16-byte,
   * default). */
  vec?: 4 | 8;
  /** How the 16-byte loads are typed (matmul-coop-wgsl.ts CoopMatmulOptions.vec8Type; default "u32"). */
  vec8Type?: "u32" | "mat2x4";
  /** Forced split-K chunk count for dense batch-1 products (default: the plan's rule). */
  splitK?: number;
  /** Most elements of one scratch (one binding; the backend's segment size): split-K takes fewer
   * chunks where its f32 partials would not fit. Default unbounded. */
  maxScratchElems?: number;
  /** Epilogue of the dense products: "scratch" (default: through a 16×16 f32 workgroup scratch per
   * subgroup) or "auto" (coopStoreT straight into out where {@link coopDirectEpilogueOk} allows —
   * M, N multiples of 16 — which also frees the scratch's 1 KiB per subgroup of workgroup memory,
   * so blocks with two stages of 16 subgroups fit; scratch elsewhere). Grouped products always use
   * the scratch. */
  epilogue?: "scratch" | "auto";
  /** The device's workgroup memory (bytes): candidate blocks that would need more for a call's
   * layout and epilogue are skipped for that call ({@link coopFittingTiles}). Default unbounded. */
  workgroupBytes?: number;
}

/** The candidate blocks of `cfg` (default [tile]) whose kernel for `o` fits cfg.workgroupBytes;
 * when none does, the default 128×128×32 two-stage block (which fits every layout in 48 KiB). */
export function coopFittingTiles(cfg: CoopLaunchConfig, o: Pick<CoopMatmulOptions, "transA" | "transB" | "epilogue" | "staging">): readonly CoopTile[] {
  const all = cfg.candidates ?? [cfg.tile];
  if (cfg.workgroupBytes === undefined) return all;
  const fit = all.filter((tile) => coopWorkgroupBytes({ ...o, tile, scaled: true }) <= cfg.workgroupBytes!);
  return fit.length > 0 ? fit : [COOP_DEFAULT_TILE];
}

/** The default block, real cooperative matrices. */
export const COOP_LAUNCH_DEFAULT: CoopLaunchConfig = { tile: COOP_DEFAULT_TILE, emulate: false };

/** Scratch buffers of the tensor-core launches, by name (the backend hands out reusable ones of at
 * least `length` elements of `dtype`; contents need not be preserved between products). */
export type CoopScratch = (name: string, dtype: DType, length: number) => Buf;

/** Names of the scratches: partial maxima (u32), packed A and B (f16), split-K partials (f32). */
export const COOP_SCRATCH = { amax: "coop_amax", packA: "coop_pack_a", packB: "coop_pack_b", splitK: "coop_split_k" } as const;

const FLOATS: readonly DType[] = ["f32", "f16", "bf16"];

/** The plan of a dense product under `cfg` (block and split-K; matmul-coop-plan.ts). */
export function coopDensePlan(spec: MatmulSpec, cfg: CoopLaunchConfig, epilogue: "scratch" | "direct" = "scratch"): CoopPlan {
  if ((cfg.operands ?? "packed") === "f32") return { tile: cfg.tile, splits: 1 };
  const tiles = coopFittingTiles(cfg, { transA: !!spec.transA, transB: !!spec.transB, epilogue, staging: cfg.staging });
  return planCoopMatmul(spec.M, spec.N, spec.K, spec.batch ?? 1, tiles, cfg.splitK);
}

/** The epilogue of a packed dense product under `cfg`: "direct" when cfg.epilogue is "auto" and the
 * output allows it (M, N multiples of 16, out offset and batch stride multiples of 4). */
export function coopDenseEpilogue(spec: MatmulSpec, ooff: number, cfg: CoopLaunchConfig): "scratch" | "direct" {
  return cfg.epilogue === "auto" && coopDirectEpilogueOk({ M: spec.M, N: spec.N, outOff: ooff, strideOut: spec.strideOut, batch: spec.batch }) ? "direct" : "scratch";
}

/** The kernel options of packed operands under `cfg` (staging "regs" with vec, or "coop"/"none"). */
export function coopPackedOptions(cfg: CoopLaunchConfig, staging: CoopStaging = cfg.staging ?? "regs"): Pick<CoopMatmulOptions, "input" | "packed" | "scaled" | "staging" | "vec" | "vec8Type" | "mode" | "emulate"> {
  const vec = staging === "regs" ? cfg.vec ?? 8 : 1;
  return { input: "f16", packed: true, scaled: true, staging, vec, ...(vec === 8 && cfg.vec8Type === "mat2x4" ? { vec8Type: "mat2x4" as const } : {}), mode: "kernel", emulate: cfg.emulate };
}

/** Pack one operand (src of any float dtype) into the scratch `name` by `g`; returns the launch
 * (null when empty) and whether it was scaled (f16 sources are not). */
export function coopPackOperand(src: Buf, g: CoopPackGeometry, scratch: CoopScratch, name: string, amax: Buf, which: 0 | 1): { launch: Launch | null; dst: Buf; scaled: boolean } {
  const scaled = src.dtype !== "f16";
  const dst = scratch(name, "f16", Math.max(8, coopPackHalves(g)));
  return { launch: coopPackLaunch(src, dst, g, scaled ? amax : null, which), dst, scaled };
}

/** The kernel-mode reduce of split-K partials: out[c_off + e] (+)= Σ_z part[z·count + e]. */
function splitReduceKernel(accumulate: boolean): Kernel {
  const label = `coop_split_k_reduce${accumulate ? "_acc" : ""}`;
  return memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_part", type: "f32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("count", "splits", "c_off"),
    code: `@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  for (var e = wg.x * 256u + li; e < P.count; e += nwg.x * 256u) {
    var s = ${accumulate ? "b_out[P.c_off + e]" : "0.0"};
    for (var z = 0u; z < P.splits; z++) { s += b_part[z * P.count + e]; }
    b_out[P.c_off + e] = s;
  }
}`,
  }));
}

/**
 * One tensor-core matmul `out[b] (+)= op(a[b])·op(b[b])` (see {@link MatmulSpec}; element offsets
 * aoff/boff/ooff; default batch strides are the packed sizes). Returns [] when M, N or batch is 0.
 * a and b may be f32, f16 or bf16 ("packed" operands), out is f32. Packed: the max-abs launch,
 * a pack per operand, the kernel (once per full K chunk as a batch, plus one for a ragged last
 * chunk, when split), and with split-K the reduce into out. "f32" operands: the max-abs launch and
 * the in-register kernel. Scratch buffers come from `scratch` ({@link COOP_SCRATCH}).
 * @throws Error unless a, b are f32/f16/bf16 (f32 for the "f32" operands path) and out f32, or when a
 *   dimension needs more than 65535 workgroups.
 */
export function coopMatmulLaunches(a: Buf, aoff: number, b: Buf, boff: number, out: Buf, ooff: number, spec: MatmulSpec, scratch: CoopScratch, cfg: CoopLaunchConfig = COOP_LAUNCH_DEFAULT): Launch[] {
  const packed = (cfg.operands ?? "packed") === "packed";
  if (!FLOATS.includes(a.dtype) || !FLOATS.includes(b.dtype) || out.dtype !== "f32" || (!packed && (a.dtype !== "f32" || b.dtype !== "f32"))) {
    throw new Error(`webgpu tensor-core matmul: a, b must be ${packed ? "f32, f16 or bf16" : "f32"} and out f32, got ${a.dtype}/${b.dtype}/${out.dtype}`);
  }
  const { M, N, K } = spec;
  const batch = spec.batch ?? 1;
  if (M === 0 || N === 0 || batch === 0) return [];
  const strideA = spec.strideA ?? M * K, strideB = spec.strideB ?? K * N, strideOut = spec.strideOut ?? M * N;
  const transA = !!spec.transA, transB = !!spec.transB, accumulate = !!spec.accumulate;
  const amax = scratch(COOP_SCRATCH.amax, "u32", COOP_AMAX_WORDS);
  if (!packed) {
    const wg: [number, number, number] = [Math.ceil(N / cfg.tile.BN), Math.ceil(M / cfg.tile.BM), batch];
    if (wg.some((g) => g > 65535)) throw new Error(`webgpu tensor-core matmul: grid ${wg} exceeds 65535 workgroups per dimension`);
    const o: CoopMatmulOptions = { input: "f32", transA, transB, accumulate, mode: "kernel", vec: 1, scaled: true, tile: cfg.tile, emulate: cfg.emulate };
    const params = [M, N, K, aoff, boff, ooff, strideA, strideB, strideOut, batch];
    return [coopAbsMaxLaunch(a, aoff, M * K, strideA, b, boff, K * N, strideB, batch, amax), { kernel: coopKernel(o), bufs: [a, b, out, amax], params, workgroups: wg }];
  }
  const epilogue = coopDenseEpilogue(spec, ooff, cfg);
  const plan = coopDensePlan(spec, cfg, epilogue);
  const { tile } = plan;
  let splits = plan.splits;
  while (splits > 1 && (splits + 1) * M * N > (cfg.maxScratchElems ?? Infinity)) splits--;
  const launches: Launch[] = [];
  if (a.dtype !== "f16" || b.dtype !== "f16") launches.push(coopAbsMaxLaunch(a, aoff, M * K, strideA, b, boff, K * N, strideB, batch, amax));
  // stored orientation: A [M, K] (or [K, M] transposed), B [K, N] (or [N, K]); padded to the block
  const gA = transA ? coopPackGeometry(aoff, K, M, M, strideA, batch, tile.BK, tile.BM) : coopPackGeometry(aoff, M, K, K, strideA, batch, tile.BM, tile.BK);
  const gB = transB ? coopPackGeometry(boff, N, K, K, strideB, batch, tile.BN, tile.BK) : coopPackGeometry(boff, K, N, N, strideB, batch, tile.BK, tile.BN);
  const pa = coopPackOperand(a, gA, scratch, COOP_SCRATCH.packA, amax, 0);
  const pb = coopPackOperand(b, gB, scratch, COOP_SCRATCH.packB, amax, 1);
  for (const p of [pa, pb]) if (p.launch) launches.push(p.launch);
  const mask = (pa.scaled ? 1 : 0) | (pb.scaled ? 2 : 0);
  const o: CoopMatmulOptions = { ...coopPackedOptions(cfg), transA, transB, accumulate, tile, epilogue };
  const grid = (z: number): [number, number, number] => {
    const wg: [number, number, number] = [Math.ceil(N / tile.BN), Math.ceil(M / tile.BM), z];
    if (wg.some((g) => g > 65535)) throw new Error(`webgpu tensor-core matmul: grid ${wg} exceeds 65535 workgroups per dimension`);
    return wg;
  };
  if (splits === 1) {
    const params = [M, N, K, 0, 0, ooff, gA.dstStride, gB.dstStride, strideOut, batch, gA.dstLd, gB.dstLd, mask];
    launches.push({ kernel: coopKernel({ ...o, accumulate }), bufs: [pa.dst, pb.dst, out, amax], params, workgroups: grid(batch) });
    return launches;
  }
  // split-K (batch 1): chunk z covers K rows/columns [z·chunk, …) of both packed operands — a
  // batched product with batch strides of one chunk — into partials [z, M, N], then the reduce
  const chunk = Math.ceil(K / splits / tile.BK) * tile.BK;
  const full = Math.min(splits, Math.floor(K / chunk));
  const last = K - full * chunk;
  const slabs = full + (last > 0 ? 1 : 0);
  const part = scratch(COOP_SCRATCH.splitK, "f32", slabs * M * N);
  const kStepA = transA ? chunk * gA.dstLd : chunk, kStepB = transB ? chunk : chunk * gB.dstLd;
  const ko = coopKernel({ ...o, accumulate: false });
  if (full > 0) launches.push({ kernel: ko, bufs: [pa.dst, pb.dst, part, amax], params: [M, N, chunk, 0, 0, 0, kStepA, kStepB, M * N, full, gA.dstLd, gB.dstLd, mask], workgroups: grid(full) });
  if (last > 0) launches.push({ kernel: ko, bufs: [pa.dst, pb.dst, part, amax], params: [M, N, last, full * kStepA, full * kStepB, full * M * N, 0, 0, M * N, 1, gA.dstLd, gB.dstLd, mask], workgroups: grid(1) });
  launches.push({ kernel: splitReduceKernel(accumulate), bufs: [part, out], params: [M * N, slabs, ooff], workgroups: [Math.min(8192, Math.ceil((M * N) / 256)), 1, 1] });
  return launches;
}
