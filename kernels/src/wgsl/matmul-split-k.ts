/**
 * Split-K for the fast matmul's weight-gradient shape: `out (+)= Aᵀ·B` with A [K, M] and B [K, N]
 * stored row-major (transA, not transB, batch 1) — the `dW = dYᵀ·X` of every linear layer, where K
 * is the number of tokens (thousands) and the M×N output is small enough that even the largest
 * tile leaves most of the GPU idle (e.g. 1024×1024 is 32 tiles of 128×256 for 132 SMs).
 *
 * The K rows are cut into `splits` contiguous chunks of ⌊K/splits⌋ rows — in this layout a chunk of
 * A (or B) is a contiguous block, so the chunks run as ONE batched fast matmul (batch = splits, batch
 * strides chunk·M and chunk·N) into a scratch [splits(+1), M, N]; the remainder rows (K mod splits)
 * go through one more matmul into the last slab. A reduce kernel then writes
 * `out = (accumulate ? out : 0) + Σ_s scratch[s]`, summing slabs in ascending order (deterministic).
 * The same idea as CUTLASS's "split-K serial/parallel" GEMM (NVIDIA CUTLASS docs, "Efficient GEMM in
 * CUDA", §Parallelized reductions).
 */
import type { Buf, MatmulSpec } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, memoKernel, u32s } from "./launch.ts";
import { planMatmulFastLaunches } from "./matmul-fast-launch.ts";
import { DEFAULT_MATMUL_LIMITS, MATMUL_TILE_CHOICES, type MatmulLimits, tileFits } from "./matmul-fast-tiles.ts";

/** Fewest K rows per chunk worth splitting for. */
const MIN_CHUNK = 512;
/** Most chunks. */
const MAX_SPLITS = 16;

/** A split-K plan: the number of equal chunks and the scratch elements it needs. */
export interface SplitKPlan {
  splits: number;
  /** Rows per chunk (⌊K/splits⌋). */
  chunk: number;
  /** K − splits·chunk rows handled by one extra matmul (0: none). */
  rem: number;
  /** f32 elements of scratch: (splits + (rem ? 1 : 0))·M·N. */
  scratchElems: number;
}

/**
 * Whether (and how) to split `spec`: only transA, not transB, batch 1, and only when the largest
 * tile that fits `limits` yields fewer than its minimum workgroup count unsplit; then the fewest
 * chunks (of at least 512 rows, at most 16) that give it that count. Returns null otherwise.
 */
export function planSplitK(spec: MatmulSpec, limits: MatmulLimits = DEFAULT_MATMUL_LIMITS): SplitKPlan | null {
  const { M, N, K } = spec;
  if (!spec.transA || spec.transB || (spec.batch ?? 1) !== 1 || M * N === 0) return null;
  const big = MATMUL_TILE_CHOICES.find((c) => tileFits(c.tile, limits));
  if (!big) return null;
  const tiles = Math.ceil(M / big.tile.BM) * Math.ceil(N / big.tile.BN);
  if (tiles >= big.minWorkgroups) return null;
  const want = Math.ceil(big.minWorkgroups / tiles);
  const splits = Math.min(want, MAX_SPLITS, Math.floor(K / MIN_CHUNK));
  if (splits < 2) return null;
  const chunk = Math.floor(K / splits);
  const rem = K - splits * chunk;
  return { splits, chunk, rem, scratchElems: (splits + (rem ? 1 : 0)) * M * N };
}

/** Launches of a split-K matmul (see the module comment); `scratch` holds ≥ plan.scratchElems f32
 * from element 0. Offsets are element offsets of the views. */
export function splitKMatmulLaunches(a: Buf, aoff: number, b: Buf, boff: number, out: Buf, ooff: number, spec: MatmulSpec, plan: SplitKPlan, scratch: Buf, maxPerDim = 65535, limits: MatmulLimits = DEFAULT_MATMUL_LIMITS): Launch[] {
  const { M, N } = spec;
  const { splits, chunk, rem } = plan;
  const mn = M * N;
  const launches: Launch[] = [
    ...planMatmulFastLaunches(a, aoff, b, boff, scratch, 0, { M, N, K: chunk, batch: splits, transA: true, strideA: chunk * M, strideB: chunk * N, strideOut: mn }, maxPerDim, limits),
  ];
  if (rem) launches.push(...planMatmulFastLaunches(a, aoff + splits * chunk * M, b, boff + splits * chunk * N, scratch, splits * mn, { M, N, K: rem, transA: true }, maxPerDim, limits));
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
