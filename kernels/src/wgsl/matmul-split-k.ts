/**
 * Split-K for the fast matmul: `out (+)= op(A)·op(B)` (batch 1, any transposes) whose M×N output has
 * too few tiles to fill the GPU while K is long — above all the weight gradient `dW = dYᵀ·X` of
 * every linear layer (transA), where K is the number of tokens (thousands) and the output is a
 * weight (e.g. 1024×1024 is 64 tiles of 128×128 for 132 SMs).
 *
 * The K range is cut into `splits` contiguous chunks of ⌊K/splits⌋ — a chunk of a K-major operand
 * (A when transA, B when not transB) is a contiguous block of rows, a chunk of the other layout a
 * column range of its rows (row stride `ldk` = the full K, see planMatmulFast) — so the chunks run
 * as ONE batched fast matmul (batch = splits, batch strides = the chunk's offset) into a scratch
 * [splits(+1), M, N]; the remainder (K mod splits) goes through one more matmul into the last slab.
 * A reduce kernel then writes `out = (accumulate ? out : 0) + Σ_s scratch[s]`, summing slabs in
 * ascending order (deterministic: no atomics, same bits every run). The same idea as CUTLASS's
 * "split-K parallel" GEMM (NVIDIA CUTLASS docs, "Efficient GEMM in CUDA", §Parallelized reductions).
 */
import type { Buf, MatmulSpec } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, memoKernel, u32s } from "./launch.ts";
import { type MatmulForcedTile, planMatmulFastLaunches } from "./matmul-fast-launch.ts";
import { DEFAULT_MATMUL_LIMITS, MATMUL_TILE_CHOICES, type MatmulLimits, tileFits } from "./matmul-fast-tiles.ts";

/** Fewest K per chunk worth splitting for. */
const MIN_CHUNK = 256;
/** Most chunks. */
const MAX_SPLITS = 16;

/**
 * The rules, per layout, measured on the H200 (docs/performance.md, `core/bench/matmul-shapes.ts
 * --sweep`): weight gradients (transA) split while the output has fewer than `below` workgroups
 * of 128×128 and aim at `target` = 256 (about two waves of the 132 SMs; ls/med dW shapes went from
 * 0.2–0.5 to 0.6–0.8 of cuBLAS), with 128×128×8 chunks; the other layouts only when the output is
 * below one wave (128 tiles: splitting 128-tile outputs such as 4096×512×1024 lost 10–25%),
 * aiming at 128, with 128×128×16 chunks (1024×512×1024: 0.071 → 0.054 ms).
 */
interface SplitRule {
  below: number;
  target: number;
  tile: MatmulForcedTile;
}
const TILE_128_128_8: MatmulForcedTile = { tile: { BM: 128, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 }, prefetchDistance: 4 };
const TILE_128_128_16: MatmulForcedTile = { tile: { BM: 128, BN: 128, BK: 16, TM: 8, TN: 8, padA: 0, padB: 0 }, prefetchDistance: 4 };
const RULE_WEIGHT_GRAD: SplitRule = { below: 256, target: 256, tile: TILE_128_128_8 };
const RULE_OTHER: SplitRule = { below: 128, target: 128, tile: TILE_128_128_16 };

/** A split-K plan: the number of equal chunks, the chunks' tile and the scratch elements it needs. */
export interface SplitKPlan {
  splits: number;
  /** Rows per chunk (⌊K/splits⌋). */
  chunk: number;
  /** K − splits·chunk rows handled by one extra matmul (0: none). */
  rem: number;
  /** f32 elements of scratch: (splits + (rem ? 1 : 0))·M·N. */
  scratchElems: number;
  /** The chunks' tile (null: the planner's choice for the chunk matmul's shape). */
  tile: MatmulForcedTile | null;
}

/**
 * Whether (and how) to split `spec` (batch 1 only): by the rule of its layout (see SplitRule: Aᵀ·B
 * below 256 workgroups of 128×128 toward 256; other layouts below 128 toward 128), the fewest
 * chunks, a power of two, that reach the rule's target, at most 16 and each at least 256 long.
 * The chunks' tile is the rule's (128×128×8 for Aᵀ·B, 128×128×16 otherwise), or the largest
 * 128×128 one that fits `limits`, or else the planner's choice. Returns null when no split applies.
 * `forceSplits` (tuning, tests) replaces the count for any batch-1 spec with K ≥ forceSplits
 * (≤ 1: never split).
 */
export function planSplitK(spec: MatmulSpec, limits: MatmulLimits = DEFAULT_MATMUL_LIMITS, forceSplits?: number): SplitKPlan | null {
  const { M, N, K } = spec;
  if ((spec.batch ?? 1) !== 1 || M * N === 0) return null;
  const rule = spec.transA ? RULE_WEIGHT_GRAD : RULE_OTHER;
  const tile = [rule.tile, TILE_128_128_8].find((t) => tileFits(t.tile, limits)) ?? null;
  const plan = (splits: number): SplitKPlan => {
    const chunk = Math.floor(K / splits), rem = K - splits * chunk;
    return { splits, chunk, rem, scratchElems: (splits + (rem ? 1 : 0)) * M * N, tile };
  };
  if (forceSplits !== undefined) {
    if (!Number.isInteger(forceSplits)) throw new Error(`matmul split-K: forced splits must be an integer, got ${forceSplits}`);
    return forceSplits <= 1 || K < forceSplits ? null : plan(forceSplits);
  }
  const t = tile?.tile ?? MATMUL_TILE_CHOICES.find((c) => tileFits(c.tile, limits))?.tile;
  if (!t) return null;
  const tiles = Math.ceil(M / t.BM) * Math.ceil(N / t.BN);
  if (tiles >= rule.below) return null;
  let splits = 1;
  while (tiles * splits < rule.target && splits < MAX_SPLITS && Math.floor(K / (2 * splits)) >= MIN_CHUNK) splits *= 2;
  return splits < 2 ? null : plan(splits);
}

/** Launches of a split-K matmul (see the module comment); `scratch` holds ≥ plan.scratchElems f32
 * from element 0. Offsets are element offsets of the views. The chunks use `plan.tile` unless
 * `force` forces another (see {@link planMatmulFastLaunches}). */
export function splitKMatmulLaunches(a: Buf, aoff: number, b: Buf, boff: number, out: Buf, ooff: number, spec: MatmulSpec, plan: SplitKPlan, scratch: Buf, maxPerDim = 65535, limits: MatmulLimits = DEFAULT_MATMUL_LIMITS, force?: MatmulForcedTile): Launch[] {
  const { M, N, K } = spec;
  const transA = spec.transA ?? false, transB = spec.transB ?? false;
  const { splits, chunk, rem } = plan;
  const mn = M * N;
  // element offset of K-position k in A and in B (K-major layouts: whole rows; others: columns)
  const kOffA = (k: number): number => (transA ? k * M : k);
  const kOffB = (k: number): number => (transB ? k : k * N);
  const tile = force ?? plan.tile ?? undefined;
  const launches: Launch[] = [
    ...planMatmulFastLaunches(a, aoff, b, boff, scratch, 0, { M, N, K: chunk, batch: splits, transA, transB, strideA: kOffA(chunk), strideB: kOffB(chunk), strideOut: mn }, maxPerDim, limits, tile, K),
  ];
  if (rem) launches.push(...planMatmulFastLaunches(a, aoff + kOffA(splits * chunk), b, boff + kOffB(splits * chunk), scratch, splits * mn, { M, N, K: rem, transA, transB }, maxPerDim, limits, tile, K));
  const slabs = splits + (rem ? 1 : 0);
  const kernel: Kernel = memoKernel("matmul_split_k_reduce", () => ({
    label: "matmul_split_k_reduce",
    buffers: [
      { name: "b_part", type: "f32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("n", "slabs", "ooff", "accumulate"),
    code: `${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  var s: f32 = 0.0;
  if (P.accumulate != 0u) { s = b_out[P.ooff + i]; }
  var t: f32 = b_part[i];
  for (var k = 1u; k < P.slabs; k = k + 1u) { t = t + b_part[k * P.n + i]; }
  b_out[P.ooff + i] = s + t;
}`,
  }));
  launches.push({ kernel, bufs: [scratch, out], params: [mn, slabs, ooff, spec.accumulate ? 1 : 0], workgroups: groups(mn) });
  return launches;
}
