/**
 * Batched, optionally transposed f32 matmul of the cpu backend (see MatmulSpec in ../backend.ts).
 *
 * One kernel, i-k-j order, so the innermost loop walks contiguous memory of row-major storage:
 * four output rows are updated together from each pair of rows of op(B) (register blocking: op(B)
 * is streamed once per four rows of A, and each accumulator load/store serves two k) into float64
 * accumulator rows. op(A)[i,k] is read in place (transA just swaps the strides). With transB,
 * op(B) is not contiguous by rows, so it is handled in column panels of 128: each panel (K × 128)
 * is copied transposed into scratch, then the same kernel runs; without transB, panels of 512
 * columns are read in place. No whole matrix is copied.
 *
 * Summation over k is ascending in a float64 accumulator, adding the products of k and k+1
 * together (acc + (a_k·b_k + a_k+1·b_k+1)), so results are deterministic; `accumulate` adds the
 * finished sum to the old output once.
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

/** Columns of op(B) per panel when B is stored transposed (copied to a K × PANEL scratch). */
const PANEL = 128;
/** Columns per panel when B is stored K×N (read in place): keeps the four accumulator rows in L1/L2. */
const PANEL_DIRECT = 512;

/** Scratch reused across calls (ops run synchronously on one thread, so one set suffices); grown
 * on demand, which keeps the hot path free of allocations and GC pauses. */
let accScratch: [Float64Array, Float64Array, Float64Array, Float64Array] = [new Float64Array(0), new Float64Array(0), new Float64Array(0), new Float64Array(0)];
let panel32 = new Float32Array(0);
let panel64 = new Float64Array(0);

/** Four accumulator rows of at least `width` elements. */
function accumulators(width: number): readonly [Float64Array, Float64Array, Float64Array, Float64Array] {
  if (accScratch[0].length < width) accScratch = [new Float64Array(width), new Float64Array(width), new Float64Array(width), new Float64Array(width)];
  return accScratch;
}

/** A panel scratch of at least n elements of the storage type of B (copies stay exact). */
function panelScratch(f32: boolean, n: number): FArr {
  if (f32) {
    if (panel32.length < n) panel32 = new Float32Array(n);
    return panel32;
  }
  if (panel64.length < n) panel64 = new Float64Array(n);
  return panel64;
}

/** out[b] (=|+=) op(A[b]) · op(B[b]) for every batch b. Arrays are the storages, `*o` offsets. */
export function matmulF(a: FArr, ao: number, b: FArr, bo: number, out: FArr, oo: number, g: MatmulGeometry): void {
  const { M, N, K, transA, transB, accumulate } = g;
  if (M === 0 || N === 0) return;
  // op(A)[i,k] = a[pa + i*sai + k*sak]
  const sai = transA ? 1 : K;
  const sak = transA ? M : 1;
  const width = Math.min(transB ? PANEL : PANEL_DIRECT, N);
  const acc = accumulators(width);
  const panel: FArr | null = transB ? panelScratch(b instanceof Float32Array, K * width) : null;
  for (let t = 0; t < g.batch; t++) {
    const pa = ao + t * g.strideA;
    const pb = bo + t * g.strideB;
    const po = oo + t * g.strideOut;
    if (panel === null) {
      for (let j0 = 0; j0 < N; j0 += width) panelKernel(a, pa, sai, sak, M, K, b, pb + j0, N, Math.min(width, N - j0), out, po + j0, N, accumulate, acc);
      continue;
    }
    // B stored N×K: copy K×nb column panels of op(B) (rows j0..j0+nb of B, transposed), then i-k-j.
    for (let j0 = 0; j0 < N; j0 += width) {
      const nb = Math.min(width, N - j0);
      for (let jj = 0; jj < nb; jj++) {
        const row = pb + (j0 + jj) * K;
        for (let k = 0; k < K; k++) panel[k * nb + jj] = b[row + k]!;
      }
      panelKernel(a, pa, sai, sak, M, K, panel, 0, nb, nb, out, po + j0, N, accumulate, acc);
    }
  }
}

/** out[i, 0..nb) (=|+=) Σ_k op(A)[i,k] · src[base + k·ks + j] for all i < M: i-k-j, four rows of A
 * and two k per pass over the panel, float64 accumulators, k ascending. `ldo` is the row stride of out. */
function panelKernel(a: FArr, pa: number, sai: number, sak: number, M: number, K: number, src: FArr, base: number, ks: number, nb: number, out: FArr, po: number, ldo: number, accumulate: boolean, acc: readonly [Float64Array, Float64Array, Float64Array, Float64Array]): void {
  const [acc0, acc1, acc2, acc3] = acc;
  let i = 0;
  for (; i + 4 <= M; i += 4) {
    acc0.fill(0, 0, nb);
    acc1.fill(0, 0, nb);
    acc2.fill(0, 0, nb);
    acc3.fill(0, 0, nb);
    const r0 = pa + i * sai;
    let k = 0;
    for (; k + 2 <= K; k += 2) {
      const ak = r0 + k * sak;
      const ak1 = ak + sak;
      const x0 = a[ak]!;
      const x1 = a[ak + sai]!;
      const x2 = a[ak + 2 * sai]!;
      const x3 = a[ak + 3 * sai]!;
      const y0 = a[ak1]!;
      const y1 = a[ak1 + sai]!;
      const y2 = a[ak1 + 2 * sai]!;
      const y3 = a[ak1 + 3 * sai]!;
      const bk = base + k * ks;
      const bk1 = bk + ks;
      for (let j = 0; j < nb; j++) {
        const bv = src[bk + j]!;
        const bw = src[bk1 + j]!;
        acc0[j] = acc0[j]! + (x0 * bv + y0 * bw);
        acc1[j] = acc1[j]! + (x1 * bv + y1 * bw);
        acc2[j] = acc2[j]! + (x2 * bv + y2 * bw);
        acc3[j] = acc3[j]! + (x3 * bv + y3 * bw);
      }
    }
    for (; k < K; k++) {
      const ak = r0 + k * sak;
      const x0 = a[ak]!;
      const x1 = a[ak + sai]!;
      const x2 = a[ak + 2 * sai]!;
      const x3 = a[ak + 3 * sai]!;
      const bk = base + k * ks;
      for (let j = 0; j < nb; j++) {
        const bv = src[bk + j]!;
        acc0[j] = acc0[j]! + x0 * bv;
        acc1[j] = acc1[j]! + x1 * bv;
        acc2[j] = acc2[j]! + x2 * bv;
        acc3[j] = acc3[j]! + x3 * bv;
      }
    }
    store(out, po + i * ldo, acc0, nb, accumulate);
    store(out, po + (i + 1) * ldo, acc1, nb, accumulate);
    store(out, po + (i + 2) * ldo, acc2, nb, accumulate);
    store(out, po + (i + 3) * ldo, acc3, nb, accumulate);
  }
  for (; i < M; i++) {
    acc0.fill(0, 0, nb);
    const r0 = pa + i * sai;
    for (let k = 0; k < K; k++) {
      const x0 = a[r0 + k * sak]!;
      const bk = base + k * ks;
      for (let j = 0; j < nb; j++) acc0[j] = acc0[j]! + x0 * src[bk + j]!;
    }
    store(out, po + i * ldo, acc0, nb, accumulate);
  }
}

function store(out: FArr, o: number, acc: Float64Array, n: number, accumulate: boolean): void {
  if (accumulate) for (let j = 0; j < n; j++) out[o + j] = out[o + j]! + acc[j]!;
  else for (let j = 0; j < n; j++) out[o + j] = acc[j]!;
}
