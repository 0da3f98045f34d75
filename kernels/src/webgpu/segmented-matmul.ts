/**
 * `matmul` when an operand is held in several buffer segments (webgpu/buffers.ts): the product is
 * split into output blocks (rows m0…m1, columns n0…n1, K whole, so every output element is still
 * one dot product over all of K) and each block runs the unchanged matmul kernels on operands that
 * lie in one segment:
 *
 * - M is cut where the rows of `out` (N elements each) or of A (K each, when A is not transposed)
 *   cross into their next segment; N is cut where the rows of a transposed B (K each: the LM head
 *   and tied-embedding weights [vocab, hidden]) do, or, for a B stored K×N, into column blocks of
 *   at most {@link MATMUL_TEMP_ELEMS}/K columns — unless K itself exceeds that bound: then K is
 *   split along B's rows with accumulation instead (`splitK`).
 * - An operand block that is contiguous and inside one segment is bound there as is (the rows of
 *   A, the rows of a transposed B, whole-width rows of out). Any other block — a seam row that
 *   straddles a boundary, a column block of a transposed A or of an untransposed B, an output
 *   block narrower than N — is gathered into a contiguous temporary (a strided 2-D copy,
 *   wgsl/segment-copy.ts), and an output block is scattered back (after gathering it first when
 *   accumulating).
 * - Temporaries hold at most min(S, {@link MATMUL_TEMP_ELEMS}) elements each; a shape that would
 *   need more (a row of K elements above that bound) is refused with an error naming it.
 *
 * Batched products run per batch matrix. Cost: none for operands in one segment; the copies of
 * gathered blocks otherwise.
 */
import type { MatmulSpec, View } from "../backend.ts";
import { matmulExtents } from "../wgsl/matmul.ts";
import { crosses, isSegmented, mergeRuns, rebase, regionRuns, segStrideOf, type RowRun, type SegmentHost } from "./segments.ts";

/** Most elements of one temporary block of a split matmul (256 MiB of f32). */
export const MATMUL_TEMP_ELEMS = 1 << 26;

/** What {@link matmulSegmented} needs of the backend besides {@link SegmentHost}. */
export interface MatmulHost extends SegmentHost {
  /** Backend.matmul (on operands in one segment each). */
  matmul(a: View, b: View, out: View, spec: MatmulSpec): void;
  /** dst[r·dld + c] = src[r·sld + c] for r < rows, c < cols (f32), splitting over segments. */
  copy2d(src: View, sld: number, dst: View, dld: number, rows: number, cols: number): void;
}

const F32 = ["f32"] as const;

/** Cut [0, n) into pieces of at most `max`, respecting the cuts of `runs`. */
function subdivide(runs: readonly RowRun[], max: number): [number, number][] {
  const out: [number, number][] = [];
  for (const r of runs) for (let s = r.r0; s < r.r1; s += max) out.push([s, Math.min(r.r1, s + max)]);
  return out;
}

/** Backend.matmul on operands of which at least one is segmented (file doc). */
export function matmulSegmented(host: MatmulHost, a: View, b: View, out: View, spec: MatmulSpec): void {
  const ext = matmulExtents(spec);
  host.checkView(a, ext.a, "matmul", "a", F32);
  host.checkView(b, ext.b, "matmul", "b", F32);
  host.checkView(out, ext.out, "matmul", "out", F32);
  const { M, N, K } = spec;
  const batch = spec.batch ?? 1;
  if (batch === 0 || M * N === 0) return;
  if (batch > 1) {
    const sA = spec.strideA ?? M * K;
    const sB = spec.strideB ?? K * N;
    const sO = spec.strideOut ?? M * N;
    const one: MatmulSpec = { M, N, K, transA: spec.transA, transB: spec.transB, accumulate: spec.accumulate };
    for (let i = 0; i < batch; i++) host.matmul({ buf: a.buf, off: a.off + i * sA }, { buf: b.buf, off: b.off + i * sB }, { buf: out.buf, off: out.off + i * sO }, one);
    return;
  }
  const tA = spec.transA ?? false;
  const tB = spec.transB ?? false;
  const T = Math.min(host.segElems(), MATMUL_TEMP_ELEMS);
  const tooBig = (what: string): Error => new Error(`webgpu matmul: M=${M} N=${N} K=${K}${tA ? " transA" : ""}${tB ? " transB" : ""} on operands split across bindings needs ${what} larger than the ${T}-element bound of one temporary block`);
  if (isSegmented(b) && !tB && K > T) return splitK(host, a, b, out, M, N, K, tA, spec.accumulate ?? false, T, tooBig);
  // N blocks
  let nRuns: RowRun[] = [{ r0: 0, r1: N, seam: false }];
  if (isSegmented(b)) {
    if (tB) nRuns = regionRuns(b.off, N, K, K, segStrideOf(b));
    else {
      nRuns = [{ r0: 0, r1: N, seam: false }];
      const nb = Math.floor(T / K);
      if (nb < N || crosses(b, K * N)) nRuns = subdivide(nRuns, nb).map(([r0, r1]) => ({ r0, r1, seam: false }));
    }
  }
  const nSplit = nRuns.length > 1;
  const nBlocks = nSplit ? subdivide(nRuns, T) : [[0, N] as [number, number]];
  const maxNb = Math.max(...nBlocks.map(([n0, n1]) => n1 - n0));
  // M blocks
  const lists: RowRun[][] = [];
  if (isSegmented(out)) lists.push(regionRuns(out.off, M, N, N, segStrideOf(out)));
  if (isSegmented(a) && !tA) lists.push(regionRuns(a.off, M, K, K, segStrideOf(a)));
  const mRuns = lists.length > 0 ? mergeRuns(M, lists) : [{ r0: 0, r1: M, seam: false }];
  let mbMax = M;
  if (isSegmented(a) && tA) {
    if (K > T) throw tooBig(`a column block of A (K = ${K} rows)`);
    if (crosses(a, K * M)) mbMax = Math.min(mbMax, Math.floor(T / K));
  }
  if (nSplit) mbMax = Math.min(mbMax, Math.floor(T / maxNb));
  for (const [m0, m1] of subdivide(mRuns, Math.max(1, mbMax)))
    for (const [n0, n1] of nBlocks) block(host, a, b, out, M, N, K, tA, tB, spec.accumulate ?? false, m0, m1, n0, n1, T, tooBig);
}

/** One output block [m0, m1) × [n0, n1) of {@link matmulSegmented}. */
function block(host: MatmulHost, a: View, b: View, out: View, M: number, N: number, K: number, tA: boolean, tB: boolean, accumulate: boolean, m0: number, m1: number, n0: number, n1: number, T: number, tooBig: (what: string) => Error): void {
  const mb = m1 - m0;
  const nb = n1 - n0;
  const temps: View[] = [];
  const temp = (n: number, what: string): View => {
    if (n > T) throw tooBig(what);
    const t: View = { buf: host.alloc("f32", n, "other", "any"), off: 0 };
    temps.push(t);
    return t;
  };
  /** A contiguous range: bound as is when it lies in one segment, else copied to a temporary. */
  const contiguous = (v: View, n: number, what: string): View => {
    if (!crosses(v, n)) return rebase(v, n, "matmul", what);
    const t = temp(n, what);
    host.copy(v, t, n);
    return t;
  };
  let av: View;
  if (!tA) av = contiguous({ buf: a.buf, off: a.off + m0 * K }, mb * K, `rows ${m0}…${m1} of A`);
  else if (mb === M) av = contiguous(a, K * M, "A");
  else {
    av = temp(K * mb, `columns ${m0}…${m1} of A`);
    host.copy2d({ buf: a.buf, off: a.off + m0 }, M, av, mb, K, mb);
  }
  let bv: View;
  if (tB) bv = contiguous({ buf: b.buf, off: b.off + n0 * K }, nb * K, `rows ${n0}…${n1} of B`);
  else if (nb === N) bv = contiguous(b, K * N, "B");
  else {
    bv = temp(K * nb, `columns ${n0}…${n1} of B`);
    host.copy2d({ buf: b.buf, off: b.off + n0 }, N, bv, nb, K, nb);
  }
  const ov: View = { buf: out.buf, off: out.off + m0 * N + n0 };
  const spec: MatmulSpec = { M: mb, N: nb, K, transA: tA, transB: tB, accumulate };
  if (nb === N && !crosses(ov, mb * N)) host.matmul(av, bv, rebase(ov, mb * N, "matmul", "out"), spec);
  else {
    const t = temp(mb * nb, `the output block ${m0}…${m1} × ${n0}…${n1}`);
    if (accumulate) host.copy2d(ov, N, t, nb, mb, nb);
    host.matmul(av, bv, t, spec);
    host.copy2d(t, nb, ov, N, mb, nb);
  }
  for (const t of temps) host.free(t.buf);
}

/**
 * A B stored K×N across segments whose column blocks would exceed one temporary (K > T): split K
 * instead, along B's row runs (each bound as is; a straddling row of B copied to a temporary),
 * out += A[:, k0…k1) · B[k0…k1, :] block by block (the first block as asked, the others
 * accumulating: each output element sums its K terms in blocks, f32 rounding). A's K block is
 * its rows k0…k1 when transposed (contiguous), else a column block gathered into a temporary.
 */
function splitK(host: MatmulHost, a: View, b: View, out: View, M: number, N: number, K: number, tA: boolean, accumulate: boolean, T: number, tooBig: (what: string) => Error): void {
  if (N > T) throw tooBig(`a row of B (N = ${N})`);
  const kMax = Math.floor(T / Math.max(M, N));
  if (kMax < 1) throw tooBig(`a K block of A (M = ${M}) or of B (N = ${N})`);
  let first = true;
  for (const [k0, k1] of subdivide(regionRuns(b.off, K, N, N, segStrideOf(b)), kMax)) {
    const kc = k1 - k0;
    const temps: View[] = [];
    const temp = (n: number): View => {
      const t: View = { buf: host.alloc("f32", n, "other", "any"), off: 0 };
      temps.push(t);
      return t;
    };
    const bRows: View = { buf: b.buf, off: b.off + k0 * N };
    let bv: View;
    if (!crosses(bRows, kc * N)) bv = rebase(bRows, kc * N, "matmul", `rows ${k0}…${k1} of B`);
    else {
      bv = temp(kc * N);
      host.copy(bRows, bv, kc * N);
    }
    let av: View;
    const aRows: View = { buf: a.buf, off: a.off + k0 * M };
    if (!tA) {
      av = temp(M * kc);
      host.copy2d({ buf: a.buf, off: a.off + k0 }, K, av, kc, M, kc);
    } else if (crosses(aRows, kc * M)) {
      av = temp(kc * M);
      host.copy(aRows, av, kc * M);
    } else av = rebase(aRows, kc * M, "matmul", `rows ${k0}…${k1} of A`);
    host.matmul(av, bv, out, { M, N, K: kc, transA: tA, accumulate: first ? accumulate : true });
    first = false;
    for (const t of temps) host.free(t.buf);
  }
}
