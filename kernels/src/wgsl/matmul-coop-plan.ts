/**
 * The tensor-core matmul's choice of block and split-K per problem (the backend's `tensorCores`
 * path, matmul-coop-launch.ts and grouped-matmul-coop.ts).
 *
 * Rule: among the candidate blocks (the device's: 128×256×32 on 16 subgroups, 256×128×32 on 16,
 * 128×128×32 on 8 — or the one block the caller forced), take the largest block whose grid has at
 * least {@link COOP_WAVE_BLOCKS} workgroups; if none has, the one with the most workgroups, and —
 * dense products with batch 1 only — split K into chunks so that the grid reaches about
 * COOP_WAVE_BLOCKS, keeping every chunk at least {@link COOP_SPLIT_K_MIN_STEPS} K steps deep and at
 * most {@link COOP_SPLIT_K_MAX} chunks. Ties between equal areas go to the block whose long side
 * lies along the problem's long side.
 *
 * Why: on the H200 (132 SMs, one 512-invocation block or two 256-invocation blocks resident per
 * SM) the 16-subgroup blocks were fastest wherever their grid filled the GPU (143–155 TFLOP/s at
 * 4096³ vs 94 for 128×128), while shapes whose grid fell to 16–64 blocks ran 2–8× slower on them
 * than on 128×128 or with split-K (med_head_fwd 85 vs 75, med_expert_dX 106 vs 92; med_qo_proj_dW
 * 18 → 119 with 4 chunks, med_kv_proj_dW 20 → 102 with 8; docs/performance.md, "Tensor cores:
 * block shapes, trusted modules, split-K"). 128 blocks ≈ one wave.
 */
import type { CoopTile } from "./matmul-coop-tile.ts";

/** Grid size (workgroups) taken as filling the GPU: about one wave on a 132-SM H200. */
export const COOP_WAVE_BLOCKS = 128;

/** Most split-K chunks. */
export const COOP_SPLIT_K_MAX = 16;

/** Fewest K steps (of BK) per split-K chunk. */
export const COOP_SPLIT_K_MIN_STEPS = 8;

/** A plan: the block and the number of K chunks (1: no split). */
export interface CoopPlan {
  tile: CoopTile;
  splits: number;
}

/** Workgroups of an M×N output (× batch) with `tile`. */
export function coopGrid(M: number, N: number, batch: number, tile: CoopTile): number {
  return Math.ceil(M / tile.BM) * Math.ceil(N / tile.BN) * batch;
}

/**
 * The plan for an M×N×K product over `batch` (see the file comment). `splitK`: a forced number of
 * chunks (≥ 1; applied where the product admits a split, i.e. batch 1), or undefined for the rule;
 * `allowSplit` false never splits (grouped products).
 * @throws Error when `candidates` is empty or a forced splitK is not a positive integer.
 */
export function planCoopMatmul(M: number, N: number, K: number, batch: number, candidates: readonly CoopTile[], splitK?: number, allowSplit = true): CoopPlan {
  if (candidates.length === 0) throw new Error("planCoopMatmul: no candidate block");
  if (splitK !== undefined && !(Number.isInteger(splitK) && splitK >= 1)) throw new Error(`planCoopMatmul: splitK must be a positive integer, got ${splitK}`);
  const area = (t: CoopTile) => t.BM * t.BN;
  const fit = (t: CoopTile) => (M > N ? t.BM >= t.BN : t.BN >= t.BM);
  const sorted = [...candidates].sort((a, b) => area(b) - area(a) || Number(fit(b)) - Number(fit(a)));
  let tile = sorted.find((t) => coopGrid(M, N, batch, t) >= COOP_WAVE_BLOCKS);
  let splits = 1;
  if (!tile) {
    tile = sorted.reduce((best, t) => (coopGrid(M, N, batch, t) > coopGrid(M, N, batch, best) ? t : best));
    if (allowSplit && batch === 1 && splitK === undefined) {
      const want = Math.ceil(COOP_WAVE_BLOCKS / Math.max(1, coopGrid(M, N, 1, tile)));
      const deep = Math.floor(K / (COOP_SPLIT_K_MIN_STEPS * tile.BK));
      splits = Math.max(1, Math.min(COOP_SPLIT_K_MAX, want, deep));
    }
  }
  if (splitK !== undefined && allowSplit && batch === 1) splits = Math.min(splitK, Math.max(1, Math.ceil(K / tile.BK)));
  return { tile, splits };
}
