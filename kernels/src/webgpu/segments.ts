/**
 * Ops on segmented buffers (webgpu/buffers.ts): a buffer longer than the backend's segment size S
 * (elements, the same for every dtype) is held in several GPUBuffers, and an op binds one segment
 * at a time with its offsets rebased into it.
 *
 * An op whose operands each lie in one segment binds those segments directly ({@link rebase}).
 * Otherwise the op is split along its natural axis into *row blocks*: every operand that scales
 * with the split axis is a strided region (`perRow` elements per row, rows `ld` apart) and the
 * rows are cut wherever any operand's row run crosses into its next segment ({@link regionRuns},
 * {@link mergeRuns}). A block of rows that lies in one segment of every operand runs as is, on
 * rebased views. A *seam* row — one that straddles a segment boundary of some operand — runs on
 * a one-row temporary: inputs are copied in, the op runs, outputs are copied back
 * ({@link forRowBlocks}). Elementwise ops are the case perRow = 1 (no seams); row-wise ops
 * (norms, softmax, cross-entropy) use their row length; matmul, embedding and the grouped
 * products build on the same pieces in webgpu/segmented-ops.ts.
 *
 * The copies of seam rows go through the backend's own `copy`, which splits a range per segment
 * itself (a copy of a contiguous range is always decomposable), so nothing here binds a buffer
 * whole.
 */
import type { DType, MemTag, View, Buf } from "../backend.ts";
import { GpuBuf } from "./buffers.ts";

/** A run of rows [r0, r1); `seam` when the run is one row that crosses a segment boundary. */
export interface RowRun {
  r0: number;
  r1: number;
  seam: boolean;
}

/** Whether `v` is a view into a segmented buffer. */
export function isSegmented(v: View | null | undefined): boolean {
  return !!v && v.buf instanceof GpuBuf && v.buf.segments !== null;
}

/** Whether any of the views is into a segmented buffer. */
export function anySegmented(...vs: (View | null | undefined)[]): boolean {
  for (const v of vs) if (isSegmented(v)) return true;
  return false;
}

/**
 * The view of elements [v.off, v.off + n) on the one segment that holds them: `{buf: segment
 * handle, off: v.off − i·S}`; `v` itself when its buffer is not segmented. Throws, naming `op`,
 * `arg` and the range, when the range crosses a segment boundary.
 */
export function rebase(v: View, n: number, op: string, arg: string): View {
  const b = v.buf;
  if (!(b instanceof GpuBuf) || b.segments === null) return v;
  const S = b.segStride;
  const i = Math.min(Math.floor(v.off / S), b.segments.length - 1);
  const last = n > 0 ? Math.floor((v.off + n - 1) / S) : i;
  if (last !== i) throw new Error(`webgpu ${op}: ${arg} covers elements [${v.off}, ${v.off + n}) of buffer ${b.id} (${b.dtype}[${b.length}]), which cross the boundary of its segments of ${S} elements at element ${(i + 1) * S}; ${op} cannot split this operand across bindings`);
  return { buf: b.segments[i]!, off: v.off - i * S };
}

/** Whether elements [off, off + n) of `v`'s buffer cross a segment boundary. */
export function crosses(v: View, n: number): boolean {
  const b = v.buf;
  if (!(b instanceof GpuBuf) || b.segments === null || n <= 1) return false;
  const S = b.segStride;
  return Math.floor(v.off / S) !== Math.floor((v.off + n - 1) / S);
}

/**
 * Runs of the rows of a strided region — row r holds elements [off + r·ld, off + r·ld + cols) —
 * in a buffer of segments of S elements (S = 0: not segmented, one run): maximal runs of rows
 * that lie in one segment, and single seam rows that cross a boundary. O(segments + seams).
 */
export function regionRuns(off: number, rows: number, cols: number, ld: number, S: number): RowRun[] {
  if (rows <= 0) return [];
  if (S <= 0 || cols <= 0) return [{ r0: 0, r1: rows, seam: false }];
  const out: RowRun[] = [];
  let r = 0;
  while (r < rows) {
    const start = off + r * ld;
    const seg = Math.floor(start / S);
    const segEnd = (seg + 1) * S;
    if (start + cols > segEnd) {
      out.push({ r0: r, r1: r + 1, seam: true });
      r++;
      continue;
    }
    // the last row q ≥ r with off + q·ld + cols ≤ segEnd
    const q = ld > 0 ? Math.floor((segEnd - cols - off) / ld) : rows - 1;
    const r1 = Math.min(rows, q + 1);
    out.push({ r0: r, r1, seam: false });
    r = r1;
  }
  return out;
}

/** The common refinement of several run lists over the same `rows`: cut wherever any list cuts; a
 * piece is a seam when it is a seam row of any list. */
export function mergeRuns(rows: number, lists: readonly RowRun[][]): RowRun[] {
  if (rows <= 0) return [];
  if (lists.length === 1) return lists[0]!;
  const cuts = new Set<number>([0, rows]);
  const seams = new Set<number>();
  for (const l of lists)
    for (const run of l) {
      cuts.add(run.r0);
      cuts.add(run.r1);
      if (run.seam) seams.add(run.r0);
    }
  const sorted = [...cuts].sort((a, b) => a - b);
  const out: RowRun[] = [];
  for (let i = 0; i + 1 < sorted.length; i++) {
    const r0 = sorted[i]!;
    const r1 = sorted[i + 1]!;
    out.push({ r0, r1, seam: r1 - r0 === 1 && seams.has(r0) });
  }
  return out;
}

/** Segment size of `v`'s buffer (0 when not segmented). */
export function segStrideOf(v: View): number {
  const b = v.buf;
  return b instanceof GpuBuf && b.segments !== null ? b.segStride : 0;
}

/** What {@link forRowBlocks} needs of the backend: its public alloc/free/copy (which split ranges
 * per segment themselves) and its view validation. */
export interface SegmentHost {
  alloc(dtype: DType, length: number, tag: MemTag, contents?: "zeros" | "any"): Buf;
  free(buf: Buf): void;
  copy(src: View, dst: View, n: number): void;
  /** Validate a view of n elements (owner, bounds, dtypes); throws naming op and arg. */
  checkView(v: View, n: number, op: string, arg: string, dtypes?: readonly DType[]): void;
  /** Elements per segment (a temporary of more would itself be segmented). */
  segElems(): number;
}

/** An operand that scales with the split axis: row r at `view.off + r·ld` (ld defaults to
 * perRow), `perRow` elements read and/or written. `io` says whether a seam copy goes in, out or
 * both. */
export interface RowArg {
  view: View;
  perRow: number;
  ld?: number;
  io: "in" | "out" | "inout";
  arg: string;
  dtypes?: readonly DType[];
}

/** An operand that does not scale with the split axis (a norm weight, a dW): bound whole on its
 * one segment for every block (an error naming op and arg if it crosses a boundary). */
export interface FixedArg {
  view: View;
  n: number;
  arg: string;
  dtypes?: readonly DType[];
}

/**
 * Run `fn` once per row block of `rows` rows (file doc): with `count` rows from row `r0`, the
 * row operands as views onto one segment each (or one-row temporaries for a seam row) and the
 * fixed operands rebased. Validates every operand's whole extent first. Blocks run in ascending
 * row order, so an op that accumulates over rows (dw += …) sums its blocks in that order.
 */
export function forRowBlocks(host: SegmentHost, op: string, rows: number, args: readonly RowArg[], fixed: readonly FixedArg[], fn: (r0: number, count: number, views: View[], fixedViews: View[]) => void, onSeam?: (r: number) => void): void {
  for (const a of args) {
    const ld = a.ld ?? a.perRow;
    host.checkView(a.view, rows > 0 ? (rows - 1) * ld + a.perRow : 0, op, a.arg, a.dtypes);
  }
  for (const f of fixed) host.checkView(f.view, f.n, op, f.arg, f.dtypes);
  const fixedViews = fixed.map((f) => rebase(f.view, f.n, op, f.arg));
  const runs = mergeRuns(
    rows,
    args.map((a) => regionRuns(a.view.off, rows, a.perRow, a.ld ?? a.perRow, segStrideOf(a.view))),
  );
  for (const run of runs) {
    const count = run.r1 - run.r0;
    if (!run.seam) {
      const views = args.map((a) => {
        const ld = a.ld ?? a.perRow;
        return rebase({ buf: a.view.buf, off: a.view.off + run.r0 * ld }, (count - 1) * ld + a.perRow, op, a.arg);
      });
      fn(run.r0, count, views, fixedViews);
      continue;
    }
    if (onSeam) {
      onSeam(run.r0);
      continue;
    }
    const temps: (Buf | null)[] = [];
    const views = args.map((a, i) => {
      const row: View = { buf: a.view.buf, off: a.view.off + run.r0 * (a.ld ?? a.perRow) };
      if (!crosses(row, a.perRow)) {
        temps[i] = null;
        return rebase(row, a.perRow, op, a.arg);
      }
      if (a.perRow > host.segElems()) throw new Error(`webgpu ${op}: one row of ${a.arg} (${a.perRow} elements) is longer than a segment (${host.segElems()} elements) and crosses a segment boundary at row ${run.r0}; ${op} cannot split a row`);
      const t = host.alloc(a.view.buf.dtype, a.perRow, "other", "any");
      temps[i] = t;
      if (a.io !== "out") host.copy(row, { buf: t, off: 0 }, a.perRow);
      return { buf: t, off: 0 };
    });
    fn(run.r0, 1, views, fixedViews);
    args.forEach((a, i) => {
      const t = temps[i];
      if (!t) return;
      if (a.io !== "in") host.copy({ buf: t, off: 0 }, { buf: a.view.buf, off: a.view.off + run.r0 * (a.ld ?? a.perRow) }, a.perRow);
      host.free(t);
    });
  }
}

/** Element-range split of an elementwise op over n elements: {@link forRowBlocks} with one
 * element per row (never a seam). */
export function forElementBlocks(host: SegmentHost, op: string, n: number, args: readonly Omit<RowArg, "perRow" | "ld">[], fixed: readonly FixedArg[], fn: (start: number, count: number, views: View[], fixedViews: View[]) => void): void {
  forRowBlocks(host, op, n, args.map((a) => ({ ...a, perRow: 1 })), fixed, fn);
}
