import { describe, expect, test } from "bun:test";
import { gradcheck, f64Backend, randn } from "./gradcheck.ts";
import * as T from "../src/tensor/index.ts";

const be = f64Backend();
const TOL = 1e-6;

async function check(shapes: number[][], f: (...xs: T.Tensor[]) => T.Tensor, init?: (i: number, n: number) => Float64Array): Promise<void> {
  const r = await gradcheck(be, shapes, f, { init });
  if (r.maxRel > TOL) throw new Error(`gradcheck failed: maxRel ${r.maxRel} at ${r.where}`);
  expect(r.maxRel).toBeLessThan(TOL);
}

describe("elementwise backward vs central differences (f64)", () => {
  test("add/sub/mul/div with broadcasting", async () => {
    await check([[3, 5], [5]], (a, b) => T.add(a, b));
    await check([[3, 1], [1, 7]], (a, b) => T.sub(a, b));
    await check([[2, 3, 5], [3, 1]], (a, b) => T.mul(a, b));
    const positive = (i: number, n: number) => randn(n, `p${i}`).map((v) => (i === 1 ? 1.5 + Math.abs(v) : v));
    await check([[2, 3, 5], [1, 3, 5]], (a, b) => T.div(a, b), positive);
    await check([[7], [1]], (a, b) => T.mul(a, b));
  });
  test("unary ops", async () => {
    for (const op of ["silu", "gelu_tanh", "gelu_erf", "exp", "neg", "sigmoid", "square"] as const) {
      await check([[3, 7]], (x) => T.unary(op, x));
    }
    const pos = (_i: number, n: number) => randn(n, "pos").map((v) => 0.5 + Math.abs(v));
    for (const op of ["log", "sqrt", "rsqrt"] as const) await check([[2, 5]], (x) => T.unary(op, x), pos);
  });
  test("gradient hand-over without copies (add/sub/reshape) stays correct with shared inputs", async () => {
    await check([[3, 4]], (x) => T.add(x, x));
    await check([[3, 4]], (x) => T.sub(x, T.reshape(T.reshape(x, [12]), [3, 4])));
    await check([[3, 4], [4]], (x, b) => T.mul(T.add(T.reshape(x, [3, 4]), b), T.sub(b, x)));
    await check([[2, 6]], (x) => T.add(T.silu(x), T.reshape(T.add(T.reshape(x, [12]), T.reshape(x, [12])), [2, 6])));
  });
  test("affine, scale, and a reused input (gradient accumulation)", async () => {
    await check([[11]], (x) => T.affine(x, -1.7, 0.3));
    await check([[3, 4]], (x) => T.mul(T.scale(x, 2.5), T.silu(x)));
  });
});

describe("shape, reduction, matmul backward", () => {
  test("sum/mean over all and over axes", async () => {
    await check([[3, 5, 2]], (x) => T.sum(x));
    await check([[3, 5, 2]], (x) => T.mean(x, 1, true));
    await check([[3, 5, 2]], (x) => T.sum(x, -1));
    await check([[3, 5, 2]], (x) => T.mean(x, 0));
  });
  test("permute and transpose (values and gradients)", async () => {
    const x = T.fromArray(be, Array.from({ length: 24 }, (_, i) => i), [2, 3, 4]);
    const y = T.permute(x, [2, 0, 1]);
    expect(y.shape).toEqual([4, 2, 3]);
    const v = Array.from(await y.toArray());
    for (let a = 0; a < 4; a++) for (let b = 0; b < 2; b++) for (let c = 0; c < 3; c++) expect(v[a * 6 + b * 3 + c]).toBe(b * 12 + c * 4 + a);
    T.resetTape();
    await check([[2, 3, 5]], (t) => T.permute(t, [1, 2, 0]));
    await check([[3, 7]], (t) => T.matmul(T.transpose(t, 0, 1), t));
    await check([[2, 1, 3, 2]], (t) => T.transpose(t, -1, 1));
  });
  test("reshape, sliceRows, concatRows", async () => {
    await check([[6, 5]], (x) => T.mul(T.reshape(x, [3, 10]), T.reshape(x, [3, -1])));
    await check([[7, 3]], (x) => T.sliceRows(x, 2, 4));
    await check([[2, 3], [1, 3], [4, 3]], (a, b, c) => T.concatRows([a, b, c, T.sliceRows(a, 1, 1)]));
  });
  test("matmul plain, transposed, batched, broadcast", async () => {
    await check([[3, 5], [5, 7]], (a, b) => T.matmul(a, b));
    await check([[5, 3], [5, 7]], (a, b) => T.matmul(a, b, { transA: true }));
    await check([[3, 5], [7, 5]], (a, b) => T.matmul(a, b, { transB: true }));
    await check([[5, 3], [7, 5]], (a, b) => T.matmul(a, b, { transA: true, transB: true }));
    await check([[2, 3, 5], [2, 5, 4]], (a, b) => T.matmul(a, b));
    await check([[2, 3, 5], [5, 4]], (a, b) => T.matmul(a, b));
    await check([[2, 3, 5], [4, 5]], (a, b) => T.matmul(a, b, { transB: true }));
    await check([[2, 5, 3], [5, 4]], (a, b) => T.matmul(a, b, { transA: true }));
    await check([[3, 5], [2, 5, 4]], (a, b) => T.matmul(a, b));
    await check([[5, 3], [2, 4, 5]], (a, b) => T.matmul(a, b, { transA: true, transB: true }));
  });
  test("linear (x Wᵀ) over leading dims", async () => {
    await check([[2, 3, 5], [7, 5]], (x, w) => T.linear(x, w));
    await check([[1, 1], [1, 1]], (x, w) => T.linear(x, w));
  });
});

describe("row ops, norms, losses, attention", () => {
  test("softmax and log-softmax", async () => {
    await check([[3, 7]], (x) => T.softmax(x));
    await check([[4, 5]], (x) => T.logSoftmax(x));
  });
  test("rmsnorm and layernorm (input and weights)", async () => {
    await check([[3, 7], [7]], (x, w) => T.rmsnorm(x, w, 1e-5));
    await check([[2, 3, 5], [5], [5]], (x, w, b) => T.layernorm(x, w, b, 1e-5));
  });
  test("embedding (table gradient, repeated ids)", async () => {
    const ids = [3, 0, 3, 6, 1];
    await check([[7, 5]], (table) => T.embedding(table, T.fromArray(be, ids, [5], "i32")));
  });
  test("cross-entropy with ignored rows", async () => {
    const targets = [2, -100, 0, 10, 4];
    await check([[5, 11]], (x) => T.crossEntropy(x, T.fromArray(be, targets, [5], "i32"), 4));
  });
  test("rope and causal attention (GQA)", async () => {
    await check([[2, 3, 2, 6]], (x) => T.rope(x, 10000));
    await check([[2, 5, 4, 3], [2, 5, 2, 3], [2, 5, 2, 3]], (q, k, v) => T.causalAttention(q, k, v, 1 / Math.sqrt(3)));
    await check([[1, 1, 1, 2], [1, 1, 1, 2], [1, 1, 1, 2]], (q, k, v) => T.causalAttention(q, k, v, 0.7));
  });
  test("gatherRows and scatterAddRows (x and weights)", async () => {
    const gi = [4, 0, 4, 2, -1, 1];
    await check([[5, 3]], (x) => T.gatherRows(x, T.fromArray(be, gi, [6], "i32")));
    const si = [2, 0, 2, 6, 3];
    await check([[5, 3], [5]], (x, w) => T.scatterAddRows(x, T.fromArray(be, si, [5], "i32"), w, 7));
    await check([[5, 3]], (x) => T.scatterAddRows(x, T.fromArray(be, si, [5], "i32"), null, 7));
  });
  test("topk has no gradient but selects correctly", async () => {
    const x = T.fromArray(be, [0.1, 0.9, 0.5, 0.9, -1, 2, 3, 0], [2, 4]);
    const { values, indices } = T.topk(x, 2);
    expect(Array.from(await indices.toArray())).toEqual([1, 3, 2, 1]);
    expect(Array.from(await values.toArray())).toEqual([0.9, 0.9, 3, 2]);
    T.resetTape();
  });
});
