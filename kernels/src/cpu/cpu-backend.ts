/**
 * `CpuBackend`: the pure TypeScript implementation of the {@link Backend} contract
 * (../backend.ts). It is the reference the webgpu kernels are tested against and the fallback
 * where no adapter exists.
 *
 * Ops run eagerly on the calling thread; `read`/`flush` resolve at once. Every op validates its
 * views (live buffer of this backend, dtype, bounds) and throws an Error naming the op and the
 * argument. Arithmetic is float64 in local variables with a fixed summation order everywhere, so
 * results are deterministic; in `precision: "f32"` f32 buffers are Float32Array (each stored value
 * is rounded to f32), in `precision: "f64"` they are Float64Array and nothing is rounded (for
 * finite-difference gradient checks).
 */

import type { AdamWParams, Backend, ClipScaleParams, LambParams, BackendInfo, BinaryOp, Buf, DType, GroupedMatmulDevSpec, GroupedMatmulSpec, GroupedWeightGradSpec, HostArray, MatmulSpec, MemTag, MemoryStats, RandomFillSpec, ReduceOp, UnaryOp, View } from "../backend.ts";
import { groupedDevExtents, groupedDevGeometry, groupedMatmulExtents, groupedMatmulGeometry, groupedWGradExtents, groupedWGradGeometry } from "../grouped-matmul-spec.ts";
import { attentionBackwardF, attentionF } from "./attention.ts";
import { crossEntropyF } from "./cross-entropy.ts";
import { ceTileBackwardF, ceTileFinishF, ceTileStatsF } from "./tiled-cross-entropy.ts";
import { affineF, axpyF, binaryF, broadcastShape, numel, unaryBackwardF, unaryF } from "./elementwise.ts";
import { siluMulBackwardF, siluMulF } from "./silu-mul.ts";
import { addRmsnormBackwardF, addRmsnormF } from "./add-rmsnorm.ts";
import { embeddingBackwardF, embeddingF } from "./embedding.ts";
import { matmulF, matmulGeometry, spanOf } from "./matmul.ts";
import { gatherAlongRowsF, gatherRowsF, histogramF, moeCombineF, moePermuteF, scatterAddAlongRowsF, scatterAddRowsF, topkF } from "./moe.ts";
import { layernormBackwardF, layernormF, rmsnormBackwardF, rmsnormF } from "./norms.ts";
import { adamwF, adamwScaledF, clipScaleF, lambUpdateF, nonFiniteF, sumSquaresF, type FloatSource } from "./optim.ts";
import { reduceF } from "./reduce.ts";
import { ropeF } from "./rope.ts";
import { softmaxBackwardF, softmaxF } from "./softmax.ts";
import { MemoryLedger, fspan, ispan, span, type CpuPrecision, type FArr, type Span } from "./store.ts";
import { castA, fillA } from "./transfer.ts";
import { checkRandomFillSpec } from "../numerics/random-fill.ts";
import { PARALLEL_MIN_ELEMENTS, philoxFillThreaded } from "./random-pool.ts";

/** Elements of a randomFill computed per host pass (bounds its scratch to 32 MiB). */
const RANDOM_CHUNK = 1 << 23;

/** Options of {@link CpuBackend}. */
export interface CpuBackendOptions {
  /** "f32" (default): f32 buffers are Float32Array. "f64": Float64Array, all math unrounded. */
  precision?: CpuPrecision;
}

const FLOATS: readonly DType[] = ["f32", "f16", "bf16"];
const HALVES: readonly DType[] = ["f16", "bf16"];

function checkCount(op: string, name: string, v: number): void {
  if (!Number.isInteger(v) || v < 0) throw new Error(`cpu ${op}: ${name} must be a non-negative integer, got ${v}`);
}

/** Pure TypeScript backend. `new CpuBackend({ precision: "f64" })` for float64 arithmetic. */
export class CpuBackend implements Backend {
  readonly info: BackendInfo;
  /** "f32" or "f64" (see class doc). */
  readonly precision: CpuPrecision;
  private readonly ledger: MemoryLedger;

  constructor(opts: CpuBackendOptions = {}) {
    const precision = opts.precision ?? "f32";
    if (precision !== "f32" && precision !== "f64") throw new Error(`CpuBackend: options.precision must be "f32" or "f64", got ${String(precision)}`);
    this.precision = precision;
    this.ledger = new MemoryLedger(precision);
    this.info = {
      name: "cpu",
      adapter: `cpu (TypeScript, ${precision})`,
      adapterBackend: "typescript",
      adapterType: "cpu",
      features: precision === "f64" ? ["f64-compute"] : [],
    };
  }

  // ---- memory ------------------------------------------------------------------------------
  alloc(dtype: DType, length: number, tag: MemTag): Buf {
    return this.ledger.alloc(dtype, length, tag);
  }
  free(buf: Buf): void {
    this.ledger.free(buf);
  }
  retag(buf: Buf, tag: MemTag): void {
    this.ledger.retag(buf, tag);
  }
  memory(): MemoryStats {
    return this.ledger.stats();
  }
  resetPeak(): void {
    this.ledger.resetPeak();
  }

  // ---- transfer ----------------------------------------------------------------------------
  write(dst: View, data: HostArray): void {
    const b = this.ledger.own(dst.buf, "write (dst)");
    const ok =
      b.dtype === "f32" ? data instanceof Float32Array || data instanceof Float64Array
      : b.dtype === "i32" ? data instanceof Int32Array
      : b.dtype === "u32" ? data instanceof Uint32Array
      : data instanceof Uint16Array;
    if (!ok) throw new Error(`cpu write: buffer #${b.id} is ${b.dtype} but data is ${data?.constructor?.name} (expected ${b.dtype === "f32" ? "Float32Array or Float64Array" : b.dtype === "i32" ? "Int32Array" : b.dtype === "u32" ? "Uint32Array" : "Uint16Array of raw bits"})`);
    const s = span(this.ledger, dst, data.length, [b.dtype], "write", "dst");
    s.a.set(data as never, s.o);
  }
  read(src: View, n: number): Promise<HostArray> {
    try {
      const s = span(this.ledger, src, n, ["f32", "f16", "bf16", "i32", "u32"], "read", "src");
      return Promise.resolve(s.a.slice(s.o, s.o + n));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  flush(): Promise<void> {
    return Promise.resolve();
  }

  // ---- basic -------------------------------------------------------------------------------
  fill(dst: View, value: number, n: number): void {
    const s = span(this.ledger, dst, n, ["f32", "f16", "bf16", "i32", "u32"], "fill", "dst");
    fillA(s.a, s.o, dst.buf.dtype, value, n);
  }
  copy(src: View, dst: View, n: number): void {
    const s = span(this.ledger, src, n, ["f32", "f16", "bf16", "i32", "u32"], "copy", "src");
    const d = span(this.ledger, dst, n, [src.buf.dtype], "copy", "dst");
    d.a.set(s.a.subarray(s.o, s.o + n) as never, d.o);
  }
  cast(src: View, dst: View, n: number): void {
    const s = span(this.ledger, src, n, FLOATS, "cast", "src");
    const d = span(this.ledger, dst, n, FLOATS, "cast", "dst");
    castA(s.a, s.o, src.buf.dtype, d.a, d.o, dst.buf.dtype, n);
  }
  randomFill(dst: View, n: number, spec: RandomFillSpec): void {
    const d = span(this.ledger, dst, n, FLOATS, "randomFill", "dst");
    checkRandomFillSpec(spec, n, "cpu randomFill");
    if (n === 0) return;
    // f32 values from the host reference (spread over threads when large: random-pool.ts), a
    // bounded chunk at a time, stored as a cast would
    const chunkLen = Math.min(n, RANDOM_CHUNK);
    const chunk = chunkLen >= PARALLEL_MIN_ELEMENTS ? new Float32Array(new SharedArrayBuffer(4 * chunkLen)) : new Float32Array(chunkLen);
    for (let j = 0; j < n; j += RANDOM_CHUNK) {
      const m = Math.min(RANDOM_CHUNK, n - j);
      const vals = chunk.subarray(0, m);
      philoxFillThreaded(vals, { ...spec, start: spec.start + j });
      castA(vals, 0, "f32", d.a, d.o + j, dst.buf.dtype, m);
    }
  }


  // ---- elementwise -------------------------------------------------------------------------
  unary(op: UnaryOp, x: View, y: View, n: number): void {
    const xs = this.f(x, n, "unary", "x");
    const ys = this.f(y, n, "unary", "y");
    unaryF(op, xs.a, xs.o, ys.a, ys.o, n);
  }
  unaryBackward(op: UnaryOp, x: View, dy: View, dx: View, n: number): void {
    const xs = this.f(x, n, "unaryBackward", "x");
    const gs = this.f(dy, n, "unaryBackward", "dy");
    const ds = this.f(dx, n, "unaryBackward", "dx");
    unaryBackwardF(op, xs.a, xs.o, gs.a, gs.o, ds.a, ds.o, n);
  }
  siluMul(gate: View, up: View, out: View, n: number): void {
    const g = this.f(gate, n, "siluMul", "gate");
    const u = this.f(up, n, "siluMul", "up");
    const o = this.f(out, n, "siluMul", "out");
    siluMulF(g.a, g.o, u.a, u.o, o.a, o.o, n);
  }
  siluMulBackward(gate: View, up: View, dy: View, dGate: View, dUp: View, n: number): void {
    const g = this.f(gate, n, "siluMulBackward", "gate");
    const u = this.f(up, n, "siluMulBackward", "up");
    const d = this.f(dy, n, "siluMulBackward", "dy");
    const dg = this.f(dGate, n, "siluMulBackward", "dGate");
    const du = this.f(dUp, n, "siluMulBackward", "dUp");
    siluMulBackwardF(g.a, g.o, u.a, u.o, d.a, d.o, dg.a, dg.o, du.a, du.o, n);
  }
  affine(x: View, y: View, n: number, alpha: number, beta: number): void {
    const xs = this.f(x, n, "affine", "x");
    const ys = this.f(y, n, "affine", "y");
    affineF(xs.a, xs.o, ys.a, ys.o, n, alpha, beta);
  }
  binary(op: BinaryOp, a: View, aShape: readonly number[], b: View, bShape: readonly number[], out: View): void {
    const os = broadcastShape(aShape, bShape);
    const as = this.f(a, numel(aShape), "binary", "a");
    const bs = this.f(b, numel(bShape), "binary", "b");
    const o = this.f(out, numel(os), "binary", "out");
    binaryF(op, as.a, as.o, aShape, bs.a, bs.o, bShape, o.a, o.o);
  }
  axpy(alpha: number, x: View, y: View, n: number): void {
    const xs = this.f(x, n, "axpy", "x");
    const ys = this.f(y, n, "axpy", "y");
    axpyF(alpha, xs.a, xs.o, ys.a, ys.o, n);
  }

  // ---- reductions --------------------------------------------------------------------------
  reduce(op: ReduceOp, x: View, out: View, outer: number, n: number, inner: number): void {
    checkCount("reduce", "outer", outer);
    checkCount("reduce", "n", n);
    checkCount("reduce", "inner", inner);
    const xs = this.f(x, outer * n * inner, "reduce", "x");
    const os = this.f(out, outer * inner, "reduce", "out");
    reduceF(op, xs.a, xs.o, os.a, os.o, outer, n, inner);
  }

  // ---- rows --------------------------------------------------------------------------------
  softmax(x: View, y: View, rows: number, cols: number, log: boolean): void {
    this.rc("softmax", rows, cols);
    const xs = this.f(x, rows * cols, "softmax", "x");
    const ys = this.f(y, rows * cols, "softmax", "y");
    softmaxF(xs.a, xs.o, ys.a, ys.o, rows, cols, log);
  }
  softmaxBackward(y: View, dy: View, dx: View, rows: number, cols: number, log: boolean): void {
    this.rc("softmaxBackward", rows, cols);
    const n = rows * cols;
    const ys = this.f(y, n, "softmaxBackward", "y");
    const gs = this.f(dy, n, "softmaxBackward", "dy");
    const ds = this.f(dx, n, "softmaxBackward", "dx");
    softmaxBackwardF(ys.a, ys.o, gs.a, gs.o, ds.a, ds.o, rows, cols, log);
  }
  rmsnorm(x: View, w: View, y: View, rstd: View, rows: number, cols: number, eps: number): void {
    this.rc("rmsnorm", rows, cols);
    const n = rows * cols;
    const xs = this.f(x, n, "rmsnorm", "x");
    const ws = this.f(w, cols, "rmsnorm", "w");
    const ys = this.f(y, n, "rmsnorm", "y");
    const rs = this.f(rstd, rows, "rmsnorm", "rstd");
    rmsnormF(xs.a, xs.o, ws.a, ws.o, ys.a, ys.o, rs.a, rs.o, rows, cols, eps);
  }
  rmsnormBackward(x: View, w: View, rstd: View, dy: View, dx: View, dw: View, rows: number, cols: number): void {
    this.rc("rmsnormBackward", rows, cols);
    const n = rows * cols;
    const xs = this.f(x, n, "rmsnormBackward", "x");
    const ws = this.f(w, cols, "rmsnormBackward", "w");
    const rs = this.f(rstd, rows, "rmsnormBackward", "rstd");
    const gs = this.f(dy, n, "rmsnormBackward", "dy");
    const ds = this.f(dx, n, "rmsnormBackward", "dx");
    const dws = this.f(dw, cols, "rmsnormBackward", "dw");
    rmsnormBackwardF(xs.a, xs.o, ws.a, ws.o, rs.a, rs.o, gs.a, gs.o, ds.a, ds.o, dws.a, dws.o, rows, cols);
  }
  addRmsnorm(x: View, r: View, w: View, sum: View, y: View, rstd: View, rows: number, cols: number, eps: number): void {
    const op = "addRmsnorm";
    this.rc(op, rows, cols);
    const n = rows * cols;
    const xs = this.f(x, n, op, "x");
    const rs = this.f(r, n, op, "r");
    const ws = this.f(w, cols, op, "w");
    const ss = this.f(sum, n, op, "sum");
    const ys = this.f(y, n, op, "y");
    const ts = this.f(rstd, rows, op, "rstd");
    addRmsnormF(xs.a, xs.o, rs.a, rs.o, ws.a, ws.o, ss.a, ss.o, ys.a, ys.o, ts.a, ts.o, rows, cols, eps);
  }
  addRmsnormBackward(sum: View, w: View, rstd: View, dy: View, dSum: View | null, dx: View, dw: View, rows: number, cols: number): void {
    const op = "addRmsnormBackward";
    this.rc(op, rows, cols);
    const n = rows * cols;
    const ss = this.f(sum, n, op, "sum");
    const ws = this.f(w, cols, op, "w");
    const ts = this.f(rstd, rows, op, "rstd");
    const gs = this.f(dy, n, op, "dy");
    const dss = dSum ? this.f(dSum, n, op, "dSum") : null;
    const ds = this.f(dx, n, op, "dx");
    const dws = this.f(dw, cols, op, "dw");
    addRmsnormBackwardF(ss.a, ss.o, ws.a, ws.o, ts.a, ts.o, gs.a, gs.o, dss?.a ?? null, dss?.o ?? 0, ds.a, ds.o, dws.a, dws.o, rows, cols);
  }
  layernorm(x: View, w: View, b: View, y: View, mean: View, rstd: View, rows: number, cols: number, eps: number): void {
    this.rc("layernorm", rows, cols);
    const n = rows * cols;
    const xs = this.f(x, n, "layernorm", "x");
    const ws = this.f(w, cols, "layernorm", "w");
    const bs = this.f(b, cols, "layernorm", "b");
    const ys = this.f(y, n, "layernorm", "y");
    const ms = this.f(mean, rows, "layernorm", "mean");
    const rs = this.f(rstd, rows, "layernorm", "rstd");
    layernormF(xs.a, xs.o, ws.a, ws.o, bs.a, bs.o, ys.a, ys.o, ms.a, ms.o, rs.a, rs.o, rows, cols, eps);
  }
  layernormBackward(x: View, w: View, mean: View, rstd: View, dy: View, dx: View, dw: View, db: View, rows: number, cols: number): void {
    this.rc("layernormBackward", rows, cols);
    const n = rows * cols;
    const op = "layernormBackward";
    const xs = this.f(x, n, op, "x");
    const ws = this.f(w, cols, op, "w");
    const ms = this.f(mean, rows, op, "mean");
    const rs = this.f(rstd, rows, op, "rstd");
    const gs = this.f(dy, n, op, "dy");
    const ds = this.f(dx, n, op, "dx");
    const dws = this.f(dw, cols, op, "dw");
    const dbs = this.f(db, cols, op, "db");
    layernormBackwardF(xs.a, xs.o, ws.a, ws.o, ms.a, ms.o, rs.a, rs.o, gs.a, gs.o, ds.a, ds.o, dws.a, dws.o, dbs.a, dbs.o, rows, cols);
  }

  // ---- matmul ------------------------------------------------------------------------------
  matmul(a: View, b: View, out: View, spec: MatmulSpec): void {
    const g = matmulGeometry(spec);
    const as = this.f(a, spanOf(g.batch, g.strideA, g.M * g.K), "matmul", "a");
    const bs = this.f(b, spanOf(g.batch, g.strideB, g.K * g.N), "matmul", "b");
    const os = this.f(out, spanOf(g.batch, g.strideOut, g.M * g.N), "matmul", "out");
    matmulF(as.a, as.o, bs.a, bs.o, os.a, os.o, g);
  }

  /** One `matmul` kernel call per non-empty group (so each group's rows are bit-identical to a
   * per-group `matmul`). */
  groupedMatmul(x: View, w: View, out: View, spec: GroupedMatmulSpec): void {
    const g = groupedMatmulGeometry(spec, "cpu");
    const ext = groupedMatmulExtents(g);
    const xs = this.f(x, ext.x, "groupedMatmul", "x");
    const ws = this.f(w, ext.w, "groupedMatmul", "w");
    const os = this.f(out, ext.out, "groupedMatmul", "out");
    for (let k = 0; k < g.G; k++) {
      const r0 = g.offsets[k]!;
      const M = g.offsets[k + 1]! - r0;
      if (M === 0) continue;
      const geo = matmulGeometry({ M, N: g.N, K: g.K, transB: g.transB, accumulate: g.accumulate });
      matmulF(xs.a, xs.o + r0 * g.K, ws.a, ws.o + k * g.strideW, os.a, os.o + r0 * g.N, geo);
    }
  }

  /** Device offsets read from the cpu storage and checked (non-decreasing within [0, R]). */
  private groupOffsets(offsets: View, G: number, R: number, op: string): Int32Array {
    const os = this.i(offsets, G + 1, op, "offsets");
    const o = os.a.slice(os.o, os.o + G + 1);
    for (let g = 0; g <= G; g++) {
      const v = o[g]!;
      if (v < 0 || v > R || (g > 0 && v < o[g - 1]!)) throw new Error(`cpu ${op}: offsets must be non-decreasing within [0, ${R}], got [${Array.from(o).join(", ")}]`);
    }
    return o;
  }

  /** One `matmul` kernel call per non-empty group, as `groupedMatmul` (bit-identical to a per-group
   * `matmul`); offsets read from the (host-resident) device buffer. */
  groupedMatmulDev(x: View, w: View, out: View, offsets: View, spec: GroupedMatmulDevSpec): void {
    const g = groupedDevGeometry(spec, "cpu");
    const ext = groupedDevExtents(g);
    const op = "groupedMatmulDev";
    const xs = this.f(x, ext.x, op, "x");
    const ws = this.f(w, ext.w, op, "w");
    const os = this.f(out, ext.out, op, "out");
    const off = this.groupOffsets(offsets, g.G, g.R, op);
    for (let k = 0; k < g.G; k++) {
      const r0 = off[k]!;
      const M = off[k + 1]! - r0;
      if (M === 0 || g.N === 0) continue;
      if (g.K === 0) {
        if (!g.accumulate) os.a.fill(0, os.o + r0 * g.N, os.o + (r0 + M) * g.N);
        continue;
      }
      const geo = matmulGeometry({ M, N: g.N, K: g.K, transB: g.transB, accumulate: g.accumulate });
      matmulF(xs.a, xs.o + r0 * g.K, ws.a, ws.o + k * g.strideW, os.a, os.o + r0 * g.N, geo);
    }
  }

  /** Per group the same kernel call as a linear's dW (`matmul` with transA over the group's rows). */
  groupedWeightGrad(dy: View, x: View, dw: View, offsets: View, spec: GroupedWeightGradSpec): void {
    const g = groupedWGradGeometry(spec, "cpu");
    const ext = groupedWGradExtents(g);
    const op = "groupedWeightGrad";
    const ds = this.f(dy, ext.dy, op, "dy");
    const xs = this.f(x, ext.x, op, "x");
    const ws = this.f(dw, ext.dw, op, "dw");
    const off = this.groupOffsets(offsets, g.G, g.R, op);
    for (let k = 0; k < g.G; k++) {
      const r0 = off[k]!;
      const rows = off[k + 1]! - r0;
      const base = ws.o + k * g.strideW;
      if (rows === 0) {
        if (!g.accumulate) ws.a.fill(0, base, base + g.M * g.N);
        continue;
      }
      const geo = matmulGeometry({ M: g.M, N: g.N, K: rows, transA: true, accumulate: g.accumulate });
      matmulF(ds.a, ds.o + r0 * g.M, xs.a, xs.o + r0 * g.N, ws.a, base, geo);
    }
  }

  // ---- embeddings, losses ------------------------------------------------------------------
  embedding(table: View, ids: View, out: View, n: number, dim: number): void {
    checkCount("embedding", "n", n);
    checkCount("embedding", "dim", dim);
    const is = this.i(ids, n, "embedding", "ids");
    const os = this.f(out, n * dim, "embedding", "out");
    const ts = this.f(table, 0, "embedding", "table");
    const vocab = dim === 0 ? 0 : Math.floor((table.buf.length - table.off) / dim);
    embeddingF(ts.a, ts.o, vocab, is.a, is.o, os.a, os.o, n, dim);
  }
  embeddingBackward(dout: View, ids: View, dtable: View, n: number, dim: number): void {
    checkCount("embeddingBackward", "n", n);
    checkCount("embeddingBackward", "dim", dim);
    const gs = this.f(dout, n * dim, "embeddingBackward", "dout");
    const is = this.i(ids, n, "embeddingBackward", "ids");
    const ts = this.f(dtable, 0, "embeddingBackward", "dtable");
    const vocab = dim === 0 ? 0 : Math.floor((dtable.buf.length - dtable.off) / dim);
    embeddingBackwardF(gs.a, gs.o, is.a, is.o, ts.a, ts.o, vocab, n, dim);
  }
  crossEntropy(logits: View, targets: View, losses: View, dlogits: View, rows: number, vocab: number, ignoreIndex: number, gradScale: number): void {
    this.rc("crossEntropy", rows, vocab);
    const op = "crossEntropy";
    const ls = this.f(logits, rows * vocab, op, "logits");
    const ts = this.i(targets, rows, op, "targets");
    const ss = this.f(losses, rows, op, "losses");
    const ds = this.f(dlogits, rows * vocab, op, "dlogits");
    crossEntropyF(ls.a, ls.o, ts.a, ts.o, ss.a, ss.o, ds.a, ds.o, rows, vocab, ignoreIndex, gradScale);
  }
  crossEntropyTileStats(logits: View, targets: View, stats: View, rows: number, cols: number, col0: number, ignoreIndex: number, first: boolean): void {
    const op = "crossEntropyTileStats";
    this.rc(op, rows, cols);
    checkCount(op, "col0", col0);
    const ls = this.f(logits, rows * cols, op, "logits");
    const ts = this.i(targets, rows, op, "targets");
    const ss = this.f(stats, 3 * rows, op, "stats");
    ceTileStatsF(ls.a, ls.o, ts.a, ts.o, ss.a, ss.o, rows, cols, col0, ignoreIndex, first);
  }
  crossEntropyTileFinish(stats: View, targets: View, lse: View, losses: View, rows: number, vocab: number, ignoreIndex: number, zLoss: number): void {
    const op = "crossEntropyTileFinish";
    this.rc(op, rows, vocab);
    const ss = this.f(stats, 3 * rows, op, "stats");
    const ts = this.i(targets, rows, op, "targets");
    const es = this.f(lse, rows, op, "lse");
    const os = this.f(losses, rows, op, "losses");
    ceTileFinishF(ss.a, ss.o, ts.a, ts.o, es.a, es.o, os.a, os.o, rows, vocab, ignoreIndex, zLoss);
  }
  crossEntropyTileBackward(logits: View, targets: View, lse: View, gradOut: View, rows: number, cols: number, col0: number, ignoreIndex: number, gradScale: number, zLoss: number): void {
    const op = "crossEntropyTileBackward";
    this.rc(op, rows, cols);
    checkCount(op, "col0", col0);
    const ls = this.f(logits, rows * cols, op, "logits");
    const ts = this.i(targets, rows, op, "targets");
    const es = this.f(lse, rows, op, "lse");
    const gs = this.f(gradOut, 1, op, "gradOut");
    ceTileBackwardF(ls.a, ls.o, ts.a, ts.o, es.a, es.o, gs.a[gs.o]!, rows, cols, col0, ignoreIndex, gradScale, zLoss);
  }

  // ---- transformer pieces ------------------------------------------------------------------
  rope(x: View, y: View, batch: number, seq: number, heads: number, headDim: number, theta: number | Float64Array, inverse: boolean): void {
    for (const [k, v] of [["batch", batch], ["seq", seq], ["heads", heads], ["headDim", headDim]] as const) checkCount("rope", k, v);
    if (headDim % 2 !== 0) throw new Error(`cpu rope: headDim must be even, got ${headDim}`);
    const n = batch * seq * heads * headDim;
    const xs = this.f(x, n, "rope", "x");
    const ys = this.f(y, n, "rope", "y");
    ropeF(xs.a, xs.o, ys.a, ys.o, batch, seq, heads, headDim, theta, inverse);
  }
  attention(q: View, k: View, v: View, out: View, lse: View, B: number, S: number, H: number, Hkv: number, D: number, scale: number): void {
    this.attnDims("attention", B, S, H, Hkv, D);
    const nq = B * S * H * D;
    const nkv = B * S * Hkv * D;
    const op = "attention";
    const qs = this.f(q, nq, op, "q");
    const ks = this.f(k, nkv, op, "k");
    const vs = this.f(v, nkv, op, "v");
    const os = this.f(out, nq, op, "out");
    const ls = this.f(lse, B * H * S, op, "lse");
    attentionF(qs.a, qs.o, ks.a, ks.o, vs.a, vs.o, os.a, os.o, ls.a, ls.o, B, S, H, Hkv, D, scale);
  }
  attentionBackward(q: View, k: View, v: View, out: View, lse: View, dout: View, dq: View, dk: View, dv: View, B: number, S: number, H: number, Hkv: number, D: number, scale: number): void {
    this.attnDims("attentionBackward", B, S, H, Hkv, D);
    const nq = B * S * H * D;
    const nkv = B * S * Hkv * D;
    const op = "attentionBackward";
    const qs = this.f(q, nq, op, "q");
    const ks = this.f(k, nkv, op, "k");
    const vs = this.f(v, nkv, op, "v");
    const os = this.f(out, nq, op, "out");
    const ls = this.f(lse, B * H * S, op, "lse");
    const gs = this.f(dout, nq, op, "dout");
    const dqs = this.f(dq, nq, op, "dq");
    const dks = this.f(dk, nkv, op, "dk");
    const dvs = this.f(dv, nkv, op, "dv");
    attentionBackwardF(qs.a, qs.o, ks.a, ks.o, vs.a, vs.o, os.a, os.o, ls.a, ls.o, gs.a, gs.o, dqs.a, dqs.o, dks.a, dks.o, dvs.a, dvs.o, B, S, H, Hkv, D, scale);
  }

  // ---- MoE ---------------------------------------------------------------------------------
  topk(x: View, values: View, indices: View, rows: number, cols: number, k: number): void {
    this.rc("topk", rows, cols);
    if (!Number.isInteger(k) || k < 1 || k > 8 || k > cols) throw new Error(`cpu topk: k must be an integer in [1, min(8, cols=${cols})], got ${k}`);
    const xs = this.f(x, rows * cols, "topk", "x");
    const vs = this.f(values, rows * k, "topk", "values");
    const is = this.i(indices, rows * k, "topk", "indices");
    topkF(xs.a, xs.o, vs.a, vs.o, is.a, is.o, rows, cols, k);
  }
  gatherRows(x: View, idx: View, out: View, n: number, dim: number): void {
    this.rc("gatherRows", n, dim);
    const is = this.i(idx, n, "gatherRows", "idx");
    const os = this.f(out, n * dim, "gatherRows", "out");
    const xs = this.f(x, 0, "gatherRows", "x");
    const rowsX = dim === 0 ? 0 : Math.floor((x.buf.length - x.off) / dim);
    gatherRowsF(xs.a, xs.o, rowsX, is.a, is.o, os.a, os.o, n, dim);
  }
  scatterAddRows(x: View, idx: View, weights: View | null, out: View, n: number, dim: number): void {
    this.rc("scatterAddRows", n, dim);
    const xs = this.f(x, n * dim, "scatterAddRows", "x");
    const is = this.i(idx, n, "scatterAddRows", "idx");
    const ws = weights === null ? null : this.f(weights, n, "scatterAddRows", "weights");
    const os = this.f(out, 0, "scatterAddRows", "out");
    const rowsOut = dim === 0 ? 0 : Math.floor((out.buf.length - out.off) / dim);
    scatterAddRowsF(xs.a, xs.o, is.a, is.o, ws === null ? null : ws.a, ws === null ? 0 : ws.o, os.a, os.o, rowsOut, n, dim);
  }
  histogram(idx: View, counts: View, n: number, bins: number): void {
    this.rc("histogram", n, bins);
    const is = this.i(idx, n, "histogram", "idx");
    const cs = span(this.ledger, counts, bins, ["u32"], "histogram", "counts") as Span<Uint32Array>;
    histogramF(is.a, is.o, cs.a, cs.o, n, bins);
  }

  moePermute(idx: View, n: number, topK: number, bins: number, counts: View, offsets: View, rowOfPair: View, tokenOfRow: View, pairOfRow: View): void {
    this.rc("moePermute", n, bins);
    if (!Number.isInteger(topK) || topK < 1) throw new Error(`cpu moePermute: topK must be a positive integer, got ${topK}`);
    const op = "moePermute";
    const is = this.i(idx, n, op, "idx");
    const cs = this.i(counts, bins, op, "counts");
    const os = this.i(offsets, bins + 1, op, "offsets");
    const rp = this.i(rowOfPair, n, op, "rowOfPair");
    const tr = this.i(tokenOfRow, n, op, "tokenOfRow");
    const pr = this.i(pairOfRow, n, op, "pairOfRow");
    moePermuteF(is.a, is.o, n, topK, bins, cs.a, cs.o, os.a, os.o, rp.a, rp.o, tr.a, tr.o, pr.a, pr.o);
  }

  moeCombine(x: View, xRows: number, rowOfPair: View, weights: View | null, out: View, tokens: number, topK: number, dim: number, accumulate: boolean): void {
    const op = "moeCombine";
    for (const [k, v] of [["xRows", xRows], ["tokens", tokens], ["dim", dim]] as const) checkCount(op, k, v);
    if (!Number.isInteger(topK) || topK < 1 || topK > 8) throw new Error(`cpu moeCombine: topK must be an integer in 1…8, got ${topK}`);
    const xs = this.f(x, xRows * dim, op, "x");
    const rp = this.i(rowOfPair, tokens * topK, op, "rowOfPair");
    const ws = weights ? this.f(weights, tokens * topK, op, "weights") : null;
    const os = this.f(out, tokens * dim, op, "out");
    moeCombineF(xs.a, xs.o, xRows, rp.a, rp.o, ws ? ws.a : null, ws ? ws.o : 0, os.a, os.o, tokens, topK, dim, accumulate);
  }

  gatherAlongRows(x: View, idx: View, out: View, rows: number, cols: number, k: number): void {
    const op = "gatherAlongRows";
    for (const [n, v] of [["rows", rows], ["cols", cols], ["k", k]] as const) checkCount(op, n, v);
    const xs = this.f(x, rows * cols, op, "x");
    const is = this.i(idx, rows * k, op, "idx");
    const os = this.f(out, rows * k, op, "out");
    gatherAlongRowsF(xs.a, xs.o, is.a, is.o, os.a, os.o, rows, cols, k);
  }

  scatterAddAlongRows(dout: View, idx: View, dx: View, rows: number, cols: number, k: number): void {
    const op = "scatterAddAlongRows";
    for (const [n, v] of [["rows", rows], ["cols", cols], ["k", k]] as const) checkCount(op, n, v);
    const gs = this.f(dout, rows * k, op, "dout");
    const is = this.i(idx, rows * k, op, "idx");
    const xs = this.f(dx, rows * cols, op, "dx");
    scatterAddAlongRowsF(gs.a, gs.o, is.a, is.o, xs.a, xs.o, rows, cols, k);
  }

  // ---- optimizer ---------------------------------------------------------------------------
  adamw(param: View, grad: View, m: View, v: View, param16: View | null, n: number, p: AdamWParams): void {
    checkCount("adamw", "n", n);
    if (!Number.isInteger(p.step) || p.step < 1) throw new Error(`cpu adamw: p.step must be an integer ≥ 1 (1-based, for bias correction), got ${p.step}`);
    const ps = this.f(param, n, "adamw", "param");
    const gs = span(this.ledger, grad, n, FLOATS, "adamw", "grad");
    const ms = this.f(m, n, "adamw", "m");
    const vs = this.f(v, n, "adamw", "v");
    const hs = param16 === null ? null : span(this.ledger, param16, n, HALVES, "adamw", "param16");
    const gsrc: FloatSource = { a: gs.a as FArr | Uint16Array, o: gs.o, dtype: grad.buf.dtype };
    const h16 = hs === null ? null : { a: hs.a as Uint16Array, o: hs.o, dtype: param16!.buf.dtype };
    if (p.scaleFrom) {
      const ss = this.f(p.scaleFrom, 2, "adamw", "scaleFrom");
      adamwScaledF(ps.a, ps.o, gsrc, ms.a, ms.o, vs.a, vs.o, h16, n, p, ss.a[ss.o]!, ss.a[ss.o + 1]!);
    } else adamwF(ps.a, ps.o, gsrc, ms.a, ms.o, vs.a, vs.o, h16, n, p);
  }
  clipScale(partials: View, count: number, out: View, p: ClipScaleParams): void {
    checkCount("clipScale", "count", count);
    if (!(p.lsDiv > 0)) throw new Error(`cpu clipScale: lsDiv must be > 0, got ${p.lsDiv}`);
    const ps = this.f(partials, count, "clipScale", "partials");
    const os = this.f(out, 3, "clipScale", "out");
    const r = clipScaleF(ps.a, ps.o, count, p);
    for (let i = 0; i < 3; i++) os.a[os.o + i] = r[i]!;
  }
  lambUpdate(param: View, grad: View, m: View, v: View, update: View, n: number, p: LambParams): void {
    checkCount("lambUpdate", "n", n);
    const ps = this.f(param, n, "lambUpdate", "param");
    const gs = span(this.ledger, grad, n, FLOATS, "lambUpdate", "grad");
    const ms = this.f(m, n, "lambUpdate", "m");
    const vs = this.f(v, n, "lambUpdate", "v");
    const us = this.f(update, n, "lambUpdate", "update");
    const gsrc: FloatSource = { a: gs.a as FArr | Uint16Array, o: gs.o, dtype: grad.buf.dtype };
    lambUpdateF(ps.a, ps.o, gsrc, ms.a, ms.o, vs.a, vs.o, us.a, us.o, n, p);
  }
  sumSquares(x: View, out: View, n: number): void {
    const xs = span(this.ledger, x, n, FLOATS, "sumSquares", "x");
    const os = this.f(out, 1, "sumSquares", "out");
    os.a[os.o] = sumSquaresF({ a: xs.a as FArr | Uint16Array, o: xs.o, dtype: x.buf.dtype }, n);
  }
  nonFinite(x: View, out: View, n: number): void {
    const xs = span(this.ledger, x, n, FLOATS, "nonFinite", "x");
    const os = span(this.ledger, out, 1, ["u32"], "nonFinite", "out");
    os.a[os.o] = nonFiniteF({ a: xs.a as FArr | Uint16Array, o: xs.o, dtype: x.buf.dtype }, n) ? 1 : 0;
  }

  // ---- helpers -----------------------------------------------------------------------------
  private f(v: View, n: number, op: string, arg: string): Span<FArr> {
    return fspan(this.ledger, v, n, op, arg);
  }
  private i(v: View, n: number, op: string, arg: string): Span<Int32Array> {
    return ispan(this.ledger, v, n, op, arg);
  }
  private rc(op: string, rows: number, cols: number): void {
    checkCount(op, "rows", rows);
    checkCount(op, "cols", cols);
  }
  private attnDims(op: string, B: number, S: number, H: number, Hkv: number, D: number): void {
    for (const [k, v] of [["B", B], ["S", S], ["H", H], ["Hkv", Hkv], ["D", D]] as const) checkCount(op, k, v);
    if (Hkv < 1 || H % Hkv !== 0) throw new Error(`cpu ${op}: H (${H}) must be a positive multiple of Hkv (${Hkv})`);
  }
}
