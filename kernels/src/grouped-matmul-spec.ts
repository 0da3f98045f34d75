/**
 * Validation and extents of a grouped matmul ({@link GroupedMatmulSpec} in backend.ts), shared by
 * the cpu and webgpu backends.
 */
import type { GroupedMatmulDevSpec, GroupedMatmulSpec, GroupedWeightGradSpec } from "./backend.ts";

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

/** A validated device-offset grouped matmul (GroupedMatmulDevSpec with defaults filled). */
export interface GroupedDevGeometry {
  G: number;
  R: number;
  N: number;
  K: number;
  transB: boolean;
  strideW: number;
  accumulate: boolean;
}

/** A validated grouped weight gradient (GroupedWeightGradSpec with defaults filled). */
export interface GroupedWGradGeometry {
  G: number;
  R: number;
  M: number;
  N: number;
  strideW: number;
  accumulate: boolean;
}

function checkInts(who: string, op: string, fields: [string, number][]): void {
  for (const [k, v] of fields) {
    if (!Number.isInteger(v) || v < 0) throw new Error(`${who} ${op}: spec.${k} must be a non-negative integer, got ${v}`);
  }
}

/** Fill defaults (strideW = N·K) and validate a GroupedMatmulDevSpec. @throws naming the field. */
export function groupedDevGeometry(spec: GroupedMatmulDevSpec, who: string): GroupedDevGeometry {
  const strideW = spec.strideW ?? spec.N * spec.K;
  checkInts(who, "groupedMatmulDev", [["G", spec.G], ["R", spec.R], ["N", spec.N], ["K", spec.K], ["strideW", strideW]]);
  return { G: spec.G, R: spec.R, N: spec.N, K: spec.K, transB: spec.transB ?? false, strideW, accumulate: spec.accumulate ?? false };
}

/** Fill defaults (strideW = M·N) and validate a GroupedWeightGradSpec. @throws naming the field,
 * also when strideW < M·N with G > 1 (the groups' dW would overlap: on a GPU a write race). */
export function groupedWGradGeometry(spec: GroupedWeightGradSpec, who: string): GroupedWGradGeometry {
  const strideW = spec.strideW ?? spec.M * spec.N;
  checkInts(who, "groupedWeightGrad", [["G", spec.G], ["R", spec.R], ["M", spec.M], ["N", spec.N], ["strideW", strideW]]);
  if (spec.G > 1 && strideW < spec.M * spec.N) throw new Error(`${who} groupedWeightGrad: spec.strideW must be at least M·N = ${spec.M * spec.N} when G > 1 (each group's dW is written), got ${strideW}`);
  return { G: spec.G, R: spec.R, M: spec.M, N: spec.N, strideW, accumulate: spec.accumulate ?? false };
}

/** Elements x, w, out (and offsets) of a device-offset grouped matmul must hold from their offsets. */
export function groupedDevExtents(g: GroupedDevGeometry): { x: number; w: number; out: number; offsets: number } {
  return { x: g.R * g.K, w: g.G === 0 || g.N * g.K === 0 ? 0 : (g.G - 1) * g.strideW + g.N * g.K, out: g.R * g.N, offsets: g.G + 1 };
}

/** Elements dy, x, dw (and offsets) of a grouped weight gradient must hold from their offsets. */
export function groupedWGradExtents(g: GroupedWGradGeometry): { dy: number; x: number; dw: number; offsets: number } {
  return { dy: g.R * g.M, x: g.R * g.N, dw: g.G === 0 || g.M * g.N === 0 ? 0 : (g.G - 1) * g.strideW + g.M * g.N, offsets: g.G + 1 };
}
