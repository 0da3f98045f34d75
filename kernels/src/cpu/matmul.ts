/**
 * Batched, optionally transposed f32 matmul of the cpu backend (see MatmulSpec in ../backend.ts).
 *
 * Loop orders are chosen so the innermost loop walks contiguous memory of row-major storage:
 * - B stored K×N (no transB): i-k-j. Four output rows are updated together from each B row
 *   (register blocking: B is streamed once per four rows of A), into float64 accumulator rows.
 * - B stored N×K (transB): out[i,j] is a dot product of row i of op(A) and row j of B, both
 *   contiguous; with transA the column of A is first copied into a length-K scratch row.
 * No whole matrix is copied. Summation over k is in ascending order in a float64 accumulator, so
 * results are deterministic; `accumulate` adds the finished sum to the old output once.
 */

import type { MatmulSpec } from "../backend.ts";
import type { FArr } from "./store.ts";

/** Resolved matmul geometry: sizes and element strides with defaults filled in. */
export interface MatmulGeometry {
  M: number;
  N: number;
  K: number;
  batch: number;
  transA: boolean;
  transB: boolean;
  strideA: number;
  strideB: number;
  strideOut: number;
  accumulate: boolean;
}

/** Fill defaults of a MatmulSpec (batch 1, dense strides) and validate it; throws naming the field. */
export function matmulGeometry(spec: MatmulSpec): MatmulGeometry {
  const { M, N, K } = spec;
  for (const [k, v] of [["M", M], ["N", N], ["K", K]] as const) {
    if (!Number.isInteger(v) || v < 0) throw new Error(`cpu matmul: spec.${k} must be a non-negative integer, got ${v}`);
  }
  const batch = spec.batch ?? 1;
  if (!Number.isInteger(batch) || batch < 0) throw new Error(`cpu matmul: spec.batch must be a non-negative integer, got ${batch}`);
  const g: MatmulGeometry = {
    M,
    N,
    K,
    batch,
    transA: spec.transA ?? false,
    transB: spec.transB ?? false,
    strideA: spec.strideA ?? M * K,
    strideB: spec.strideB ?? K * N,
    strideOut: spec.strideOut ?? M * N,
    accumulate: spec.accumulate ?? false,
  };
  for (const k of ["strideA", "strideB", "strideOut"] as const) {
    if (!Number.isInteger(g[k]) || g[k] < 0) throw new Error(`cpu matmul: spec.${k} must be a non-negative integer, got ${g[k]}`);
  }
  return g;
}

/** Elements a batched operand spans: (batch − 1)·stride + size (0 when batch or size is 0). */
export function spanOf(batch: number, stride: number, size: number): number {
  return batch === 0 || size === 0 ? 0 : (batch - 1) * stride + size;
}

/** out[b] (=|+=) op(A[b]) · op(B[b]) for every batch b. Arrays are the storages, `*o` offsets. */
export function matmulF(a: FArr, ao: number, b: FArr, bo: number, out: FArr, oo: number, g: MatmulGeometry): void {
  for (let t = 0; t < g.batch; t++) {
    const pa = ao + t * g.strideA;
    const pb = bo + t * g.strideB;
    const po = oo + t * g.strideOut;
    if (g.transB) matmulDot(a, pa, b, pb, out, po, g);
    else matmulIKJ(a, pa, b, pb, out, po, g);
  }
}

/** B stored K×N: i-k-j with four rows of A at a time. */
function matmulIKJ(a: FArr, pa: number, b: FArr, pb: number, out: FArr, po: number, g: MatmulGeometry): void {
  const { M, N, K, transA, accumulate } = g;
  // op(A)[i,k] = a[pa + i*sai + k*sak]
  const sai = transA ? 1 : K;
  const sak = transA ? M : 1;
  const acc0 = new Float64Array(N);
  const acc1 = new Float64Array(N);
  const acc2 = new Float64Array(N);
  const acc3 = new Float64Array(N);
  let i = 0;
  for (; i + 4 <= M; i += 4) {
    acc0.fill(0);
    acc1.fill(0);
    acc2.fill(0);
    acc3.fill(0);
    const r0 = pa + i * sai;
    for (let k = 0; k < K; k++) {
      const ak = r0 + k * sak;
      const x0 = a[ak]!;
      const x1 = a[ak + sai]!;
      const x2 = a[ak + 2 * sai]!;
      const x3 = a[ak + 3 * sai]!;
      const bk = pb + k * N;
      for (let j = 0; j < N; j++) {
        const bv = b[bk + j]!;
        acc0[j] = acc0[j]! + x0 * bv;
        acc1[j] = acc1[j]! + x1 * bv;
        acc2[j] = acc2[j]! + x2 * bv;
        acc3[j] = acc3[j]! + x3 * bv;
      }
    }
    store(out, po + i * N, acc0, N, accumulate);
    store(out, po + (i + 1) * N, acc1, N, accumulate);
    store(out, po + (i + 2) * N, acc2, N, accumulate);
    store(out, po + (i + 3) * N, acc3, N, accumulate);
  }
  for (; i < M; i++) {
    acc0.fill(0);
    const r0 = pa + i * sai;
    for (let k = 0; k < K; k++) {
      const x0 = a[r0 + k * sak]!;
      const bk = pb + k * N;
      for (let j = 0; j < N; j++) acc0[j] = acc0[j]! + x0 * b[bk + j]!;
    }
    store(out, po + i * N, acc0, N, accumulate);
  }
}

/** B stored N×K: dot products of contiguous rows. */
function matmulDot(a: FArr, pa: number, b: FArr, pb: number, out: FArr, po: number, g: MatmulGeometry): void {
  const { M, N, K, transA, accumulate } = g;
  const row = new Float64Array(K);
  for (let i = 0; i < M; i++) {
    if (transA) for (let k = 0; k < K; k++) row[k] = a[pa + k * M + i]!;
    else for (let k = 0; k < K; k++) row[k] = a[pa + i * K + k]!;
    const o = po + i * N;
    for (let j = 0; j < N; j++) {
      const bj = pb + j * K;
      let s = 0;
      for (let k = 0; k < K; k++) s += row[k]! * b[bj + k]!;
      out[o + j] = accumulate ? out[o + j]! + s : s;
    }
  }
}

function store(out: FArr, o: number, acc: Float64Array, N: number, accumulate: boolean): void {
  if (accumulate) for (let j = 0; j < N; j++) out[o + j] = out[o + j]! + acc[j]!;
  else for (let j = 0; j < N; j++) out[o + j] = acc[j]!;
}
