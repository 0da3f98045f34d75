/**
 * Tensors larger than one binding (webgpu/buffers.ts, webgpu/segments.ts): every op family on
 * buffers held in 2–4 segments gives the same results as on one binding. Two backends on the
 * same device: `one` with the device's binding limit (every test buffer is one GPUBuffer) and
 * `seg` with `maxBindingBytes` lowered so that a segment holds {@link S} elements. Each case
 * writes the same random inputs (never zeros) at awkward offsets and sizes (primes, rows that do
 * not divide S, rows straddling a segment boundary) into both, runs the op, and compares the
 * outputs: bit for bit where the op computes each element independently of how its rows are
 * blocked, else within the stated f32 rounding (a reduction summed per segment block).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Backend, Buf, DType, HostArray, View } from "../../src/backend.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { GpuBuf } from "../../src/webgpu/buffers.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { xorshift32 } from "../../src/testing.ts";
import { bf16FromF32 } from "../../src/numerics/index.ts";

/** Elements per segment of the `seg` backend. */
const S = 1024;

let one: WebGpuBackend;
let seg: WebGpuBackend;

beforeAll(async () => {
  const g = createGPU();
  one = await WebGpuBackend.create(g);
  seg = await WebGpuBackend.create(g, { maxBindingBytes: 4 * S });
});
afterAll(() => {
  one.destroy();
  seg.destroy();
});

/** One operand: `len` elements of `dtype` (random data unless `data` is given) at element `off`
 * of a buffer with `pad` more elements after it. */
interface Operand {
  dtype?: DType;
  len: number;
  off?: number;
  pad?: number;
  data?: HostArray;
  /** Random range of f32 data (default [-1, 1)). */
  lo?: number;
  hi?: number;
}

function randomData(o: Operand, seed: number): HostArray {
  if (o.data) return o.data;
  const next = xorshift32(seed);
  const d = o.dtype ?? "f32";
  const lo = o.lo ?? -1;
  const hi = o.hi ?? 1;
  if (d === "f32") return Float32Array.from({ length: o.len }, () => lo + (next() / 2 ** 32) * (hi - lo));
  if (d === "i32") return Int32Array.from({ length: o.len }, () => Math.floor(lo + (next() / 2 ** 32) * (hi - lo)));
  if (d === "u32") return Uint32Array.from({ length: o.len }, () => next());
  return Uint16Array.from({ length: o.len }, () => bf16FromF32(lo + (next() / 2 ** 32) * (hi - lo)));
}

type Views = Record<string, View>;

/** Run `op` on both backends with the same operands and return the outputs read back (for the
 * names in `outs`: their whole `len`), plus how many segments the seg backend's buffers had. */
async function onBoth(operands: Record<string, Operand>, outs: readonly string[], op: (be: Backend, v: Views) => void): Promise<{ a: HostArray[]; b: HostArray[]; segs: number[] }> {
  const res: HostArray[][] = [];
  const segs: number[] = [];
  for (const be of [one, seg]) {
    const views: Views = {};
    const bufs: Buf[] = [];
    let seed = 17;
    for (const [name, o] of Object.entries(operands)) {
      const off = o.off ?? 0;
      const b = be.alloc(o.dtype ?? "f32", off + o.len + (o.pad ?? 0), "other");
      bufs.push(b);
      be.write({ buf: b, off }, randomData(o, seed++));
      views[name] = { buf: b, off };
      if (be === seg) segs.push((b as GpuBuf).segments?.length ?? 1);
    }
    op(be, views);
    const got: HostArray[] = [];
    for (const name of outs) got.push(await be.read(views[name]!, operands[name]!.len));
    res.push(got);
    for (const b of bufs) be.free(b);
  }
  return { a: res[0]!, b: res[1]!, segs };
}

/** Bit-level equality of two host arrays (f32 compared by bits, so −0 ≠ +0 and NaN = NaN). */
function bitsEqual(a: HostArray, b: HostArray, what: string): void {
  expect(b.length).toBe(a.length);
  const ua = new Uint32Array(a instanceof Uint16Array ? Uint32Array.from(a) : new Uint32Array(a.buffer, a.byteOffset, a.length));
  const ub = new Uint32Array(b instanceof Uint16Array ? Uint32Array.from(b) : new Uint32Array(b.buffer, b.byteOffset, b.length));
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) throw new Error(`${what}: element ${i} differs: one binding ${a[i]} vs segmented ${b[i]}`);
}

/** |a − b| ≤ atol + rtol·|a| elementwise. */
function closeTo(a: HostArray, b: HostArray, rtol: number, atol: number, what: string): void {
  expect(b.length).toBe(a.length);
  for (let i = 0; i < a.length; i++) if (!(Math.abs(a[i]! - b[i]!) <= atol + rtol * Math.abs(a[i]!))) throw new Error(`${what}: element ${i}: one binding ${a[i]} vs segmented ${b[i]}`);
}

/** Same operands on both backends, the outputs bit-identical (or within `tol`), at least one
 * operand held in 2–4 segments. Returns the one-binding outputs (in the order of `outs`). */
async function same(what: string, operands: Record<string, Operand>, outs: readonly string[], op: (be: Backend, v: Views) => void, tol?: { rtol: number; atol: number }): Promise<HostArray[]> {
  const { a, b, segs } = await onBoth(operands, outs, op);
  const most = Math.max(...segs);
  expect(most).toBeGreaterThanOrEqual(2);
  expect(most).toBeLessThanOrEqual(5);
  outs.forEach((name, i) => (tol ? closeTo(a[i]!, b[i]!, tol.rtol, tol.atol, `${what} ${name}`) : bitsEqual(a[i]!, b[i]!, `${what} ${name}`)));
  return a;
}

describe("segmented buffers: allocation, accounting, transfer", () => {
  test("a buffer longer than a segment is held in ⌈n/S⌉ GPU buffers; accounting is exact", async () => {
    expect(seg.segmentElems).toBe(S);
    const before = seg.memory();
    for (const [dtype, n] of [["f32", 3001], ["bf16", 2 * S + 1], ["i32", 4 * S], ["u32", S]] as [DType, number][]) {
      const b = seg.alloc(dtype, n, "param");
      const want = n > S ? Math.ceil(n / S) : null;
      expect((b as GpuBuf).segments?.length ?? null).toBe(want);
      const m = seg.memory();
      const bytes = n * (dtype === "bf16" ? 2 : 4);
      expect(m.current.param - before.current.param).toBe(bytes);
      seg.retag(b, "grad");
      expect(seg.memory().current.grad - before.current.grad).toBe(bytes);
      expect(seg.memory().current.param).toBe(before.current.param);
      seg.free(b);
      expect(seg.memory().current.grad).toBe(before.current.grad);
      expect(() => seg.free(b)).toThrow(/freed/);
    }
  });

  test("a segmented buffer cannot be bound whole", async () => {
    const b = seg.alloc("f32", 3 * S, "other");
    expect(() => (b as GpuBuf).gpu).toThrow(/3 segments of 1024 elements/);
    seg.free(b);
  });

  test("ops that do not split refuse, naming op, operand and range", () => {
    const big = seg.alloc("i32", 3 * S, "other");
    const small = seg.alloc("i32", 64, "other");
    const sv = { buf: small, off: 0 };
    expect(() => seg.moePermute({ buf: big, off: 0 }, 2 * S, 2, 4, sv, { buf: small, off: 8 }, { buf: big, off: 0 }, sv, sv)).toThrow(/moePermute: idx covers elements \[0, 2048\)/);
    const x = seg.alloc("f32", 3 * S, "other");
    const o = seg.alloc("f32", 64, "other");
    expect(() => seg.moeCombine({ buf: x, off: 0 }, 2 * S / 8, sv, null, { buf: o, off: 0 }, 4, 2, 8, false)).toThrow(/moeCombine: x covers elements \[0, 2048\)/);
    // a row-wise op whose one row is longer than a segment
    expect(() => seg.softmax({ buf: x, off: 0 }, { buf: x, off: 0 }, 1, 2 * S, false)).toThrow(/softmax: one row of x \(2048 elements\) is longer than a segment/);
    for (const b of [big, small, x, o]) seg.free(b);
  });

  test("write/read/copy/fill/cast across boundaries, every dtype, odd offsets", async () => {
    for (const dtype of ["f32", "i32", "u32", "bf16", "f16"] as DType[]) {
      await same(`copy ${dtype}`, { x: { dtype, len: 3001, off: 5, lo: -100, hi: 100 }, y: { dtype, len: 3001, off: 1021, pad: 3 } }, ["x", "y"], (be, v) => be.copy(v.x!, v.y!, 3001));
      await same(`fill ${dtype}`, { y: { dtype, len: 2999, off: 7 } }, ["y"], (be, v) => be.fill({ buf: v.y!.buf, off: 9 }, 3, 2990));
    }
    await same("cast f32→bf16", { x: { len: 4093, off: 3 }, y: { dtype: "bf16", len: 4093, off: 1 } }, ["y"], (be, v) => be.cast(v.x!, v.y!, 4093));
    await same("cast bf16→f32", { x: { dtype: "bf16", len: 2053, off: 1023 }, y: { len: 2053, off: 2 } }, ["y"], (be, v) => be.cast(v.x!, v.y!, 2053));
    await same("cast f32→f16", { x: { len: 3000, off: 1 }, y: { dtype: "f16", len: 3000, off: 1 } }, ["y"], (be, v) => be.cast(v.x!, v.y!, 3000));
  });
});

describe("segmented buffers: elementwise and optimizer ops (bit-identical)", () => {
  const n = 3001;
  test("unary / unaryBackward / affine / axpy / siluMul", async () => {
    for (const op of ["exp", "gelu_tanh", "silu", "rsqrt"] as const) {
      await same(`unary ${op}`, { x: { len: n, off: 3, lo: 0.1, hi: 2 }, y: { len: n, off: 1000 } }, ["y"], (be, v) => be.unary(op, v.x!, v.y!, n));
      await same(`unaryBackward ${op}`, { x: { len: n, off: 3, lo: 0.1, hi: 2 }, dy: { len: n, off: 11 }, dx: { len: n, off: 1020 } }, ["dx"], (be, v) => be.unaryBackward(op, v.x!, v.dy!, v.dx!, n));
    }
    await same("affine", { x: { len: n, off: 1 }, y: { len: n, off: 2 } }, ["y"], (be, v) => be.affine(v.x!, v.y!, n, 1.7, -0.3));
    await same("axpy in place", { x: { len: n, off: 1023 }, y: { len: n, off: 2 } }, ["y"], (be, v) => be.axpy(0.37, v.x!, v.y!, n));
    await same("siluMul", { g: { len: n, off: 1 }, u: { len: n, off: 1000 }, o: { len: n } }, ["o"], (be, v) => be.siluMul(v.g!, v.u!, v.o!, n));
    await same("siluMulBackward", { g: { len: n, off: 1 }, u: { len: n, off: 1000 }, d: { len: n, off: 5 }, dg: { len: n }, du: { len: n, off: 9 } }, ["dg", "du"], (be, v) => be.siluMulBackward(v.g!, v.u!, v.d!, v.dg!, v.du!, n));
  });

  test("binary: same shapes and broadcasts (bias rows not dividing S)", async () => {
    await same("binary add flat", { a: { len: n, off: 2 }, b: { len: n, off: 1001 }, o: { len: n, off: 7 } }, ["o"], (be, v) => be.binary("add", v.a!, [n], v.b!, [n], v.o!));
    // [rows, cols] + [cols]: rows straddle segment boundaries
    const rows = 37;
    const cols = 83;
    await same("binary mul row broadcast", { a: { len: rows * cols, off: 5 }, b: { len: cols }, o: { len: rows * cols, off: 1 } }, ["o"], (be, v) => be.binary("mul", v.a!, [rows, cols], v.b!, [cols], v.o!));
    await same("binary sub column broadcast", { a: { len: rows * cols, off: 5 }, b: { len: rows, off: 3 }, o: { len: rows * cols, off: 1 } }, ["o"], (be, v) => be.binary("sub", v.a!, [rows, cols], v.b!, [rows, 1], v.o!));
    // [3, 13, 53] with b [1, 13, 53] crossing a boundary itself: one sub-problem per leading index
    await same("binary max 3-d", { a: { len: 3 * 13 * 53, off: 5 }, b: { len: 13 * 53, off: 1000 }, o: { len: 3 * 13 * 53, off: 1 } }, ["o"], (be, v) => be.binary("max", v.a!, [3, 13, 53], v.b!, [1, 13, 53], v.o!));
  });

  test("adamw (with param16 and device scale) and lamb", async () => {
    const p = { lr: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, decoupled: true, step: 3, gradScale: 0.5 };
    await same("adamw", { p: { len: n, off: 3 }, g: { len: n, off: 1020 }, m: { len: n, off: 1 }, v: { len: n, lo: 0, hi: 1 }, p16: { dtype: "bf16", len: n, off: 1 } }, ["p", "m", "v", "p16"], (be, v) => be.adamw(v.p!, v.g!, v.m!, v.v!, v.p16!, n, p));
    await same("adamw scaleFrom, 16-bit grads", { p: { len: n, off: 3 }, g: { dtype: "bf16", len: n, off: 1021 }, m: { len: n, off: 1 }, v: { len: n, lo: 0, hi: 1 }, s: { len: 2, data: Float32Array.from([0.25, 0]) } }, ["p", "m", "v"], (be, v) => be.adamw(v.p!, v.g!, v.m!, v.v!, null, n, { ...p, scaleFrom: v.s! }));
    const lp = { beta1: 0.9, beta2: 0.999, eps: 1e-6, epsInsideSqrt: false, weightDecay: 0.01, gradScale: 1 };
    await same("lambUpdate", { p: { len: n, off: 3 }, g: { len: n, off: 1020 }, m: { len: n, off: 1 }, v: { len: n, lo: 0, hi: 1 }, u: { len: n, off: 500 } }, ["m", "v", "u"], (be, v) => be.lambUpdate(v.p!, v.g!, v.m!, v.v!, v.u!, n, lp));
  });

  test("nonFinite finds an inf in any segment; histogram counts across segments", async () => {
    for (const at of [0, 1023, 1024, 2999]) {
      const data = randomData({ len: n }, 3) as Float32Array;
      data[at] = Number.POSITIVE_INFINITY;
      await same(`nonFinite inf at ${at}`, { x: { len: n, off: 1, data }, o: { dtype: "u32", len: 1 } }, ["o"], (be, v) => be.nonFinite(v.x!, v.o!, n));
    }
    await same("nonFinite none", { x: { len: n, off: 1 }, o: { dtype: "u32", len: 1 } }, ["o"], (be, v) => be.nonFinite(v.x!, v.o!, n));
    await same("histogram", { i: { dtype: "i32", len: n, off: 1000, lo: -2, hi: 40 }, c: { dtype: "u32", len: 37 } }, ["c"], (be, v) => be.histogram(v.i!, v.c!, n, 37));
  });
});

describe("segmented buffers: reductions (per-segment partial sums: f32 rounding)", () => {
  const tol = { rtol: 1e-5, atol: 1e-5 };
  test("sumSquares and flat reduce over 2–4 segments", async () => {
    for (const n of [2049, 4093]) {
      await same(`sumSquares ${n}`, { x: { len: n, off: 3 }, o: { len: 1 } }, ["o"], (be, v) => be.sumSquares(v.x!, v.o!, n), tol);
      await same(`sumSquares bf16 ${n}`, { x: { dtype: "bf16", len: n, off: 3 }, o: { len: 1 } }, ["o"], (be, v) => be.sumSquares(v.x!, v.o!, n), tol);
      for (const op of ["sum", "mean", "max", "sumsq"] as const) await same(`reduce ${op} flat ${n}`, { x: { len: n, off: 1 }, o: { len: 1 } }, ["o"], (be, v) => be.reduce(op, v.x!, v.o!, 1, n, 1), tol);
    }
  });
  test("reduce over the middle axis with outer rows straddling boundaries", async () => {
    for (const op of ["sum", "mean", "max", "sumsq"] as const) {
      // [outer 7, n 53, inner 11]: outer slices of 583 elements cross boundaries
      await same(`reduce ${op} 7×53×11`, { x: { len: 7 * 53 * 11, off: 5 }, o: { len: 77, off: 1 } }, ["o"], (be, v) => be.reduce(op, v.x!, v.o!, 7, 53, 11), tol);
      // bias gradient shape [1, rows 61, 67]
      await same(`reduce ${op} 1×61×67`, { x: { len: 61 * 67, off: 2 }, o: { len: 67 } }, ["o"], (be, v) => be.reduce(op, v.x!, v.o!, 1, 61, 67), tol);
    }
  });
});

describe("segmented buffers: row-wise ops (row blocks; seam rows staged)", () => {
  const rows = 41;
  const cols = 97; // prime: rows straddle every boundary
  const n = rows * cols;
  test("softmax / log-softmax and backward", async () => {
    for (const log of [false, true]) {
      await same(`softmax log=${log}`, { x: { len: n, off: 3 }, y: { len: n, off: 1001 } }, ["y"], (be, v) => be.softmax(v.x!, v.y!, rows, cols, log));
      await same(`softmaxBackward log=${log}`, { y: { len: n, off: 3, lo: 0, hi: 0.05 }, dy: { len: n, off: 10 }, dx: { len: n } }, ["dx"], (be, v) => be.softmaxBackward(v.y!, v.dy!, v.dx!, rows, cols, log));
    }
  });
  test("rmsnorm, addRmsnorm, layernorm and their backwards", async () => {
    const eps = 1e-5;
    await same("rmsnorm", { x: { len: n, off: 3 }, w: { len: cols }, y: { len: n, off: 1001 }, r: { len: rows } }, ["y", "r"], (be, v) => be.rmsnorm(v.x!, v.w!, v.y!, v.r!, rows, cols, eps));
    await same("addRmsnorm", { x: { len: n, off: 3 }, r: { len: n, off: 700 }, w: { len: cols }, s: { len: n, off: 2 }, y: { len: n, off: 1001 }, t: { len: rows } }, ["s", "y", "t"], (be, v) => be.addRmsnorm(v.x!, v.r!, v.w!, v.s!, v.y!, v.t!, rows, cols, eps));
    await same("layernorm", { x: { len: n, off: 3 }, w: { len: cols }, b: { len: cols }, y: { len: n, off: 1001 }, m: { len: rows }, r: { len: rows } }, ["y", "m", "r"], (be, v) => be.layernorm(v.x!, v.w!, v.b!, v.y!, v.m!, v.r!, rows, cols, eps));
    // backwards: dx per row is blocking-independent; dw sums over rows block by block (f32 rounding)
    const tol = { rtol: 1e-5, atol: 1e-5 };
    await same("rmsnormBackward", { x: { len: n, off: 3 }, w: { len: cols }, r: { len: rows, lo: 0.5, hi: 2 }, dy: { len: n, off: 1001 }, dx: { len: n }, dw: { len: cols } }, ["dx", "dw"], (be, v) => be.rmsnormBackward(v.x!, v.w!, v.r!, v.dy!, v.dx!, v.dw!, rows, cols), tol);
    await same("addRmsnormBackward", { s: { len: n, off: 3 }, w: { len: cols }, r: { len: rows, lo: 0.5, hi: 2 }, dy: { len: n, off: 1001 }, ds: { len: n, off: 9 }, dw: { len: cols } }, ["ds", "dw"], (be, v) => be.addRmsnormBackward(v.s!, v.w!, v.r!, v.dy!, v.ds!, v.ds!, v.dw!, rows, cols), tol);
    await same("layernormBackward", { x: { len: n, off: 3 }, w: { len: cols }, m: { len: rows }, r: { len: rows, lo: 0.5, hi: 2 }, dy: { len: n, off: 1001 }, dx: { len: n }, dw: { len: cols }, db: { len: cols } }, ["dx", "dw", "db"], (be, v) => be.layernormBackward(v.x!, v.w!, v.m!, v.r!, v.dy!, v.dx!, v.dw!, v.db!, rows, cols), tol);
  });
  test("crossEntropy with ignored rows; rope forward and inverse; attention; topk; gather/scatter along rows", async () => {
    const t = randomData({ dtype: "i32", len: rows, lo: 0, hi: cols }, 5) as Int32Array;
    t[3] = -100;
    await same("crossEntropy", { l: { len: n, off: 3, lo: -5, hi: 5 }, t: { dtype: "i32", len: rows, data: t }, loss: { len: rows }, d: { len: n, off: 999 } }, ["loss", "d"], (be, v) => be.crossEntropy(v.l!, v.t!, v.loss!, v.d!, rows, cols, -100, 0.125));
    // rope: [batch 3, seq 5, heads 3, headDim 10] = 450 per batch: blocks split positions mid-sequence
    const rn = 3 * 5 * 3 * 10 * 3;
    for (const inverse of [false, true]) await same(`rope inverse=${inverse}`, { x: { len: rn, off: 700 }, y: { len: rn, off: 3 } }, ["y"], (be, v) => be.rope(v.x!, v.y!, 9, 5, 3, 10, 10000, inverse));
    // attention: batch items are independent, blocks of whole items ([4, 7, 4, 16] q, GQA 2 kv heads)
    const [B, Sq, H, Hkv, D] = [4, 7, 4, 2, 16];
    const nq = B * Sq * H * D;
    const nk = B * Sq * Hkv * D;
    await same("attention", { q: { len: nq, off: 600 }, k: { len: nk, off: 3 }, v: { len: nk, off: 700 }, o: { len: nq, off: 5 }, l: { len: B * H * Sq, off: 1000 } }, ["o", "l"], (be, v) => be.attention(v.q!, v.k!, v.v!, v.o!, v.l!, B, Sq, H, Hkv, D, 0.25));
    await same("attentionBackward", { q: { len: nq, off: 600 }, k: { len: nk, off: 3 }, v: { len: nk, off: 700 }, o: { len: nq, off: 5 }, l: { len: B * H * Sq, off: 1000, lo: 0.5, hi: 2 }, d: { len: nq, off: 9 }, dq: { len: nq, off: 800 }, dk: { len: nk }, dv: { len: nk, off: 100 } }, ["dq", "dk", "dv"], (be, v) => be.attentionBackward(v.q!, v.k!, v.v!, v.o!, v.l!, v.d!, v.dq!, v.dk!, v.dv!, B, Sq, H, Hkv, D, 0.25));
    await same("topk", { x: { len: n, off: 3 }, v: { len: rows * 5, off: 1020 }, i: { dtype: "i32", len: rows * 5 } }, ["v", "i"], (be, v) => be.topk(v.x!, v.v!, v.i!, rows, cols, 5));
    await same("gatherAlongRows", { x: { len: n, off: 3 }, i: { dtype: "i32", len: rows * 4, lo: -1, hi: cols + 1, off: 1020 }, o: { len: rows * 4 } }, ["o"], (be, v) => be.gatherAlongRows(v.x!, v.i!, v.o!, rows, cols, 4));
    await same("scatterAddAlongRows", { d: { len: rows * 4, off: 3 }, i: { dtype: "i32", len: rows * 4, lo: 0, hi: cols, off: 1020 }, x: { len: n, off: 5 } }, ["x"], (be, v) => be.scatterAddAlongRows(v.d!, v.i!, v.x!, rows, cols, 4));
  });
  test("tiled cross-entropy: stats over two tiles, finish, backward of both tiles (rows start mid-segment)", async () => {
    // 37 rows of two 97-column tiles at offset 301: each tile spans 4 segments; every row is
    // computed by the same kernel either way, seam rows on one-row temporaries
    const [r, c, off] = [37, 97, 301];
    const next = xorshift32(4242);
    const [l0, l1] = [0, 1].map(() => Float32Array.from({ length: r * c }, () => 12 * (next() / 2 ** 32) - 6));
    const t = Int32Array.from({ length: r }, (_, i) => (i % 6 === 2 ? -100 : next() % (2 * c)));
    const operands: Record<string, Operand> = {
      l0: { len: r * c, off, data: l0 }, l1: { len: r * c, off, data: l1 }, t: { dtype: "i32", len: r, off, data: t },
      stats: { len: 3 * r, off }, lse: { len: r, off }, loss: { len: r, off }, g: { len: 1, off, data: Float32Array.of(1.3) },
    };
    const [, , loss] = await same("crossEntropyTile*", operands, ["stats", "lse", "loss", "l0", "l1"], (be, v) => {
      [v.l0!, v.l1!].forEach((l, i) => be.crossEntropyTileStats(l, v.t!, v.stats!, r, c, i * c, -100, i === 0));
      be.crossEntropyTileFinish(v.stats!, v.t!, v.lse!, v.loss!, r, 2 * c, -100, 0.01);
      [v.l0!, v.l1!].forEach((l, i) => be.crossEntropyTileBackward(l, v.t!, v.lse!, v.g!, r, c, i * c, -100, 0.25, 0.01));
    });
    expect(Array.from(loss!).some((x, i) => i % 6 !== 2 && x > 0)).toBe(true); // losses were computed
  });
});

describe("segmented buffers: matmul (output blocks; K whole)", () => {
  // every output element is one dot product over all of K in both runs, but the kernels chosen
  // for a block's shape may order its K terms differently (tiles, split-K): f32 rounding
  const tol = { rtol: 1e-5, atol: 1e-5 };
  const M = 37;
  const N = 41;
  const K = 29;
  for (const transA of [false, true])
    for (const transB of [false, true])
      for (const accumulate of [false, true])
        test(`M ${M} N ${N} K ${K} transA=${transA} transB=${transB} accumulate=${accumulate}`, async () => {
          await same(`matmul tA=${transA} tB=${transB} acc=${accumulate}`, { a: { len: M * K, off: 1000 }, b: { len: K * N, off: 3 }, o: { len: M * N, off: 517 } }, ["o"], (be, v) => be.matmul(v.a!, v.b!, v.o!, { M, N, K, transA, transB, accumulate }), tol);
        });
  test("LM-head shape: a transposed B of 131 rows over 4 segments, output column blocks", async () => {
    await same("head", { a: { len: 7 * 29, off: 1 }, b: { len: 131 * 29, off: 5 }, o: { len: 7 * 131, off: 900 } }, ["o"], (be, v) => be.matmul(v.a!, v.b!, v.o!, { M: 7, N: 131, K: 29, transB: true }), tol);
    // its weight gradient dW [131, 29] = dyᵀ·x (transA) written over segments, accumulated
    await same("head dW", { dy: { len: 7 * 131, off: 900 }, x: { len: 7 * 29, off: 1 }, dw: { len: 131 * 29, off: 5 } }, ["dw"], (be, v) => be.matmul(v.dy!, v.x!, v.dw!, { M: 131, N: 29, K: 7, transA: true, accumulate: true }), tol);
    // dX = dy·W with W [131, 29] untransposed over segments: column blocks of B
    await same("head dX", { dy: { len: 7 * 131, off: 900 }, w: { len: 131 * 29, off: 5 }, dx: { len: 7 * 29, off: 1020 } }, ["dx"], (be, v) => be.matmul(v.dy!, v.w!, v.dx!, { M: 7, N: 29, K: 131 }), tol);
  });
  test("K longer than a temporary block: K split along B's rows, accumulating", async () => {
    for (const transA of [false, true])
      for (const accumulate of [false, true]) await same(`split K tA=${transA} acc=${accumulate}`, { a: { len: 1100 * 2, off: 3 }, b: { len: 1100 * 2, off: 700 }, o: { len: 4, off: 1 } }, ["o"], (be, v) => be.matmul(v.a!, v.b!, v.o!, { M: 2, N: 2, K: 1100, transA, accumulate }), { rtol: 1e-5, atol: 1e-5 });
  });
  test("batched, strided", async () => {
    await same("batched", { a: { len: 3 * 13 * 17, off: 2 }, b: { len: 3 * 17 * 19, off: 1000 }, o: { len: 3 * 13 * 19, off: 5 } }, ["o"], (be, v) => be.matmul(v.a!, v.b!, v.o!, { M: 13, N: 19, K: 17, batch: 3 }), tol);
  });
});

describe("segmented buffers: embedding, gather/scatter rows, grouped products", () => {
  const vocab = 97;
  const dim = 31; // table 3007 elements: 3 segments, rows straddling both boundaries
  const n = 53;
  test("embedding forward and backward across a split table (bit-identical)", async () => {
    const ids = randomData({ dtype: "i32", len: n, lo: -1, hi: vocab + 2 }, 9) as Int32Array;
    ids[0] = 33; // the row that straddles the first boundary (33·31 = 1023)
    ids[1] = 33;
    await same("embedding", { t: { len: vocab * dim, off: 0 }, i: { dtype: "i32", len: n, data: ids }, o: { len: n * dim, off: 900 } }, ["o"], (be, v) => be.embedding(v.t!, v.i!, v.o!, n, dim));
    const valid = Int32Array.from(ids, (x) => Math.min(Math.max(x, 0), vocab - 1));
    await same("embeddingBackward", { d: { len: n * dim, off: 900 }, i: { dtype: "i32", len: n, data: valid }, t: { len: vocab * dim, off: 0 } }, ["t"], (be, v) => be.embeddingBackward(v.d!, v.i!, v.t!, n, dim));
    await same("gatherRows", { x: { len: vocab * dim, off: 7 }, i: { dtype: "i32", len: n, data: ids }, o: { len: n * dim } }, ["o"], (be, v) => be.gatherRows(v.x!, v.i!, v.o!, n, dim));
    await same("scatterAddRows weighted", { x: { len: n * dim, off: 900 }, i: { dtype: "i32", len: n, data: ids }, w: { len: n }, o: { len: vocab * dim, off: 7 } }, ["o"], (be, v) => be.scatterAddRows(v.x!, v.i!, v.w!, v.o!, n, dim));
  });
  test("grouped matmul (host and device offsets) and grouped dW over a split expert stack", async () => {
    const G = 5;
    const N = 23;
    const K = 19; // W_g 437 elements: the stack of 5 (2185) crosses two boundaries inside experts
    const offsets = [0, 4, 4, 15, 22, 31];
    const R = 31;
    const tol = { rtol: 1e-5, atol: 1e-5 };
    for (const transB of [false, true]) {
      await same(`groupedMatmul transB=${transB}`, { x: { len: R * K, off: 3 }, w: { len: G * N * K, off: 11 }, o: { len: R * N, off: 1 } }, ["o"], (be, v) => be.groupedMatmul(v.x!, v.w!, v.o!, { offsets, N, K, transB }), tol);
      await same(`groupedMatmulDev transB=${transB}`, { x: { len: R * K, off: 3 }, w: { len: G * N * K, off: 11 }, f: { dtype: "i32", len: G + 1, data: Int32Array.from(offsets) }, o: { len: R * N, off: 1 } }, ["o"], (be, v) => be.groupedMatmulDev(v.x!, v.w!, v.o!, v.f!, { G, R, N, K, transB }), tol);
    }
    // x and out over segments too: per-group matmuls
    await same("groupedMatmul split rows", { x: { len: R * K, off: 1000 }, w: { len: G * N * K, off: 11 }, o: { len: R * N, off: 600 } }, ["o"], (be, v) => be.groupedMatmul(v.x!, v.w!, v.o!, { offsets, N, K, transB: true }), tol);
    for (const accumulate of [false, true]) await same(`groupedWeightGrad accumulate=${accumulate}`, { dy: { len: R * N, off: 1 }, x: { len: R * K, off: 3 }, f: { dtype: "i32", len: G + 1, data: Int32Array.from(offsets) }, dw: { len: G * N * K, off: 11 } }, ["dw"], (be, v) => be.groupedWeightGrad(v.dy!, v.x!, v.dw!, v.f!, { G, R, M: N, N: K, accumulate }), tol);
  });
});
