/**
 * Validation and extents of a grouped matmul ({@link GroupedMatmulSpec} in backend.ts), shared by
 * the cpu and webgpu backends.
 */
import type { GroupedMatmulSpec } from "./backend.ts";

/** A validated grouped matmul: G groups, R rows in all, row offsets, sizes, W stride. */
export interface GroupedMatmulGeometry {
  G: number;
  R: number;
  N: number;
  K: number;
  offsets: readonly number[];
  transB: boolean;
  strideW: number;
  accumulate: boolean;
}

/**
 * Fill defaults (strideW = N·K, transB/accumulate false) and validate.
 * @throws naming the field: offsets not integers, not starting at 0, decreasing, or fewer than 2
 *   entries (G ≥ 1); N, K or strideW not non-negative integers.
 */
export function groupedMatmulGeometry(spec: GroupedMatmulSpec, who: string): GroupedMatmulGeometry {
  const { N, K, offsets } = spec;
  for (const [k, v] of [["N", N], ["K", K]] as const) {
    if (!Number.isInteger(v) || v < 0) throw new Error(`${who} groupedMatmul: spec.${k} must be a non-negative integer, got ${v}`);
  }
  if (offsets.length < 2) throw new Error(`${who} groupedMatmul: spec.offsets needs G + 1 ≥ 2 entries, got ${offsets.length}`);
  if (offsets[0] !== 0) throw new Error(`${who} groupedMatmul: spec.offsets[0] must be 0, got ${offsets[0]}`);
  for (let g = 1; g < offsets.length; g++) {
    const o = offsets[g]!;
    if (!Number.isInteger(o) || o < offsets[g - 1]!) throw new Error(`${who} groupedMatmul: spec.offsets must be non-decreasing integers, got ${offsets[g - 1]} then ${o} at ${g}`);
  }
  const strideW = spec.strideW ?? N * K;
  if (!Number.isInteger(strideW) || strideW < 0) throw new Error(`${who} groupedMatmul: spec.strideW must be a non-negative integer, got ${strideW}`);
  return { G: offsets.length - 1, R: offsets[offsets.length - 1]!, N, K, offsets, transB: spec.transB ?? false, strideW, accumulate: spec.accumulate ?? false };
}

/** Elements x, w and out must hold from their offsets. */
export function groupedMatmulExtents(g: GroupedMatmulGeometry): { x: number; w: number; out: number } {
  return { x: g.R * g.K, w: g.N * g.K === 0 ? 0 : (g.G - 1) * g.strideW + g.N * g.K, out: g.R * g.N };
}
