/**
 * The fused LM head + loss linearCrossEntropy (tensor/ops/linear-cross-entropy.ts) against
 * (a) the unfused path it replaces — linear(h, W) materialising the logits, crossEntropy, and
 *     logitsZLoss for the z-loss — on the same backend, and
 * (b) an independent float64 host reference (logits, logsumexp, loss and both gradients in doubles),
 * on random data at awkward sizes: a prime vocabulary, tokens not a multiple of the chunk, tiles not
 * dividing the vocabulary, a chunk whose labels are all −100, all labels masked, a tied weight (the
 * head weight also feeds an embedding lookup), z-loss on, an upstream gradient ≠ 1.
 *
 * Tolerances. cpu f32: the logits tiles are the same products as the unfused logits (the cpu
 * matmul sums K in the same order), so the differences are (i) the softmax from exp(x − lse)
 * instead of exp(x − m)/s and the running (m, s) rounded to f32 between tiles — a few f32 ulps
 * (2⁻²⁴ ≈ 6e-8) per row — and (ii) dW and dh summed per token chunk into f32 accumulators instead
 * of one float64 sum over all tokens — one f32 rounding per chunk. Loss: 1e-6 relative; gradients:
 * 1e-5 of the gradient's largest entry (normwise: entries cancel). cpu f64: 1e-10 (summation
 * order only). webgpu (f32 accumulation in every product, K ≤ 101 terms): 1e-5 loss, 1e-4 normwise.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, type Backend } from "@zeromoe/kernels";
import { Variable, add, backward, crossEntropy, embedding, fromArray, linear, linearCrossEntropy, logitsZLoss, planTiles, scale, type LinearCrossEntropyOptions, type Tensor } from "../src/tensor/index.ts";
import { randn } from "./gradcheck.ts";

interface Problem {
  T: number;
  H: number;
  V: number;
  hidden: Float64Array;
  weight: Float64Array;
  targets: Int32Array;
  numValid: number;
  /** ids of an embedding lookup of the same weight added to the hidden states (tied weight). */
  tiedIds: Int32Array | null;
}

/** Random problem; `masked(i)` says which targets are −100. */
function problem(T: number, H: number, V: number, name: string, masked: (i: number) => boolean, tied = false): Problem {
  const hidden = randn(T * H, `${name}.h`, 11).map((v) => Math.fround(v));
  const weight = randn(V * H, `${name}.w`, 12).map((v) => Math.fround(0.8 * v));
  const r = randn(T, `${name}.t`, 13);
  const targets = Int32Array.from(r, (v, i) => (masked(i) ? -100 : Math.floor(Math.abs(v * 7919)) % V));
  if (T > 2 && !masked(T - 1)) targets[T - 1] = V - 1; // the last vocabulary entry (in the last, partial tile)
  const numValid = targets.reduce((n, t) => n + (t === -100 ? 0 : 1), 0);
  const tiedIds = tied ? Int32Array.from(randn(T, `${name}.ids`, 14), (v) => Math.floor(Math.abs(v * 104729)) % V) : null;
  return { T, H, V, hidden, weight, targets, numValid, tiedIds };
}

type Path = "fused" | "unfused";

/** Loss (× the upstream gradient g) and the gradients of hidden and weight, as float64. */
async function run(be: Backend, p: Problem, path: Path, opts: LinearCrossEntropyOptions = {}, g = 1.7): Promise<{ loss: number; dh: Float64Array; dw: Float64Array }> {
  const h = new Variable(be, p.hidden, [p.T, p.H]);
  const w = new Variable(be, p.weight, [p.V, p.H]);
  let x: Tensor = h.tensor;
  if (p.tiedIds) x = add(x, scale(embedding(w.tensor, fromArray(be, p.tiedIds, [p.T], "i32")), 0.5));
  const tg = fromArray(be, p.targets, [p.T], "i32");
  let loss: Tensor;
  if (path === "fused") loss = linearCrossEntropy(x, w.tensor, tg, p.numValid, opts);
  else {
    const logits = linear(x, w.tensor);
    loss = crossEntropy(logits, tg, p.numValid);
    if (opts.zLoss) loss = add(loss, logitsZLoss(logits, p.targets, p.numValid, opts.zLoss));
  }
  const scaled = scale(loss, g);
  const value = (await scaled.retain().toArray())[0]!;
  await backward(scaled);
  scaled.dispose();
  const out = { loss: value, dh: Float64Array.from((await h.grad()) as Float32Array), dw: Float64Array.from((await w.grad()) as Float32Array) };
  h.dispose();
  w.dispose();
  return out;
}

/** The float64 reference: g·mean over scored rows of (lse − x_t + z·lse²), and its gradients. */
function reference(p: Problem, z: number, g = 1.7): { loss: number; dh: Float64Array; dw: Float64Array } {
  const { T, H, V } = p;
  const x = Float64Array.from(p.hidden);
  if (p.tiedIds) for (let i = 0; i < T; i++) for (let k = 0; k < H; k++) x[i * H + k] += 0.5 * p.weight[p.tiedIds[i]! * H + k]!;
  const dx = new Float64Array(T * H);
  const dw = new Float64Array(V * H);
  const sc = p.numValid > 0 ? g / p.numValid : 0;
  let loss = 0;
  const row = new Float64Array(V);
  for (let i = 0; i < T; i++) {
    const t = p.targets[i]!;
    if (t === -100) continue;
    let m = -Infinity;
    for (let v = 0; v < V; v++) {
      let s = 0;
      for (let k = 0; k < H; k++) s += x[i * H + k]! * p.weight[v * H + k]!;
      row[v] = s;
      m = Math.max(m, s);
    }
    let se = 0;
    for (let v = 0; v < V; v++) se += Math.exp(row[v]! - m);
    const lse = m + Math.log(se);
    loss += lse - row[t]! + z * lse * lse;
    for (let v = 0; v < V; v++) {
      const d = sc * (Math.exp(row[v]! - lse) * (1 + 2 * z * lse) - (v === t ? 1 : 0));
      for (let k = 0; k < H; k++) {
        dx[i * H + k] += d * p.weight[v * H + k]!;
        dw[v * H + k] += d * x[i * H + k]!;
      }
    }
  }
  if (p.tiedIds) for (let i = 0; i < T; i++) for (let k = 0; k < H; k++) dw[p.tiedIds[i]! * H + k] += 0.5 * dx[i * H + k]!;
  return { loss: loss * sc, dh: dx, dw };
}

function normwiseErr(got: Float64Array, want: Float64Array): number {
  expect(got.length).toBe(want.length);
  const s = Math.max(1e-30, ...Array.from(want, Math.abs));
  let e = 0;
  for (let i = 0; i < want.length; i++) e = Math.max(e, Math.abs(got[i]! - want[i]!));
  return e / s;
}

function expectClose(label: string, got: { loss: number; dh: Float64Array; dw: Float64Array }, want: { loss: number; dh: Float64Array; dw: Float64Array }, lossTol: number, gradTol: number): void {
  const le = Math.abs(got.loss - want.loss) / Math.max(Math.abs(want.loss), 1e-30);
  expect(`${label} loss: rel err ${le.toExponential(2)}`).toBe(le <= lossTol ? `${label} loss: rel err ${le.toExponential(2)}` : `${label} loss within ${lossTol}`);
  for (const k of ["dh", "dw"] as const) {
    const e = normwiseErr(got[k], want[k]);
    expect(`${label} ${k}: normwise err ${e.toExponential(2)}`).toBe(e <= gradTol ? `${label} ${k}: normwise err ${e.toExponential(2)}` : `${label} ${k} within ${gradTol}`);
  }
}

/** The awkward cases, with the chunk/tile overrides that exercise them. */
const CASES: { name: string; p: () => Problem; opts: LinearCrossEntropyOptions }[] = [
  // 37 tokens = 4 chunks of 8 + 5; vocab 101 (prime) = 6 tiles of 16 + 5; chunk 1 (rows 8..15) all −100
  { name: "prime vocab, ragged chunks and tiles, a fully masked chunk", p: () => problem(37, 13, 101, "a", (i) => (i >= 8 && i < 16) || i % 5 === 0), opts: { chunkTokens: 8, tileVocab: 16 } },
  { name: "z-loss on", p: () => problem(29, 7, 61, "b", (i) => i % 3 === 1), opts: { chunkTokens: 6, tileVocab: 9, zLoss: 0.01 } },
  { name: "tied weight (embedding lookup + head)", p: () => problem(23, 11, 47, "c", (i) => i === 4, true), opts: { chunkTokens: 5, tileVocab: 13 } },
  { name: "one tile and one chunk (default plan)", p: () => problem(19, 9, 83, "d", (i) => i % 7 === 3), opts: {} },
  { name: "one-column tiles, one-token chunks", p: () => problem(5, 3, 7, "e", (i) => i === 2), opts: { chunkTokens: 1, tileVocab: 1, zLoss: 0.2 } },
];

describe("linearCrossEntropy (fused LM head + loss)", () => {
  for (const precision of ["f32", "f64"] as const) {
    const lossTol = precision === "f32" ? 1e-6 : 1e-10;
    const gradTol = precision === "f32" ? 1e-5 : 1e-10;
    for (const c of CASES) {
      test(`cpu ${precision}, ${c.name}: fused = unfused and = the float64 reference`, async () => {
        const be = new CpuBackend({ precision });
        const p = c.p();
        expect(p.numValid).toBeGreaterThan(0);
        const fused = await run(be, p, "fused", c.opts);
        const unfused = await run(be, p, "unfused", c.opts);
        const ref = reference(p, c.opts.zLoss ?? 0);
        expect(fused.dw.some((v) => v !== 0) && fused.dh.some((v) => v !== 0)).toBe(true);
        expectClose("fused vs unfused", fused, unfused, lossTol, gradTol);
        expectClose("fused vs float64", fused, ref, lossTol, gradTol);
      });
    }
  }

  test("cpu f32: skipping fully masked chunks (hostTargets) changes no bit", async () => {
    const be = new CpuBackend({ precision: "f32" });
    const p = problem(37, 13, 101, "a", (i) => (i >= 8 && i < 16) || i % 5 === 0);
    const a = await run(be, p, "fused", { chunkTokens: 8, tileVocab: 16 });
    const b = await run(be, p, "fused", { chunkTokens: 8, tileVocab: 16, hostTargets: p.targets });
    expect(Object.is(a.loss, b.loss)).toBe(true);
    expect(a.dh.every((v, i) => Object.is(v, b.dh[i]))).toBe(true);
    expect(a.dw.every((v, i) => Object.is(v, b.dw[i]))).toBe(true);
  });

  test("cpu f32: all labels masked gives loss 0 and zero gradients (with and without hostTargets)", async () => {
    const be = new CpuBackend({ precision: "f32" });
    const p = problem(17, 5, 31, "m", () => true);
    expect(p.numValid).toBe(0);
    for (const opts of [{ chunkTokens: 4, tileVocab: 8 }, { chunkTokens: 4, tileVocab: 8, hostTargets: p.targets, zLoss: 0.1 }]) {
      const r = await run(be, p, "fused", opts);
      expect(r.loss).toBe(0);
      expect(r.dh.every((v) => v === 0) && r.dw.every((v) => v === 0)).toBe(true);
    }
    const u = await run(be, p, "unfused");
    expect(u.loss).toBe(0);
  });

  test("bad inputs are refused, naming the argument", () => {
    const be = new CpuBackend();
    const h = fromArray(be, new Float32Array(6), [3, 2]);
    const w = fromArray(be, new Float32Array(10), [5, 2]);
    const t = fromArray(be, Int32Array.of(1, 2, -100), [3], "i32");
    expect(() => linearCrossEntropy(h, fromArray(be, new Float32Array(15), [5, 3]), t, 2)).toThrow(/must have 3 features/);
    expect(() => linearCrossEntropy(h, w, fromArray(be, Int32Array.of(1, 2), [2], "i32"), 2)).toThrow(/one target per hidden row/);
    expect(() => linearCrossEntropy(h, w, t, 4)).toThrow(/numValid must be an integer in \[0, 3\]/);
    expect(() => linearCrossEntropy(h, w, t, 2, { zLoss: -1 })).toThrow(/options.zLoss/);
    expect(() => linearCrossEntropy(h, w, t, 2, { chunkTokens: 0 })).toThrow(/options.chunkTokens must be a positive integer/);
    expect(() => linearCrossEntropy(h, w, t, 2, { hostTargets: [1] })).toThrow(/options.hostTargets has 1 entries, expected 3/);
    expect(() => linearCrossEntropy(h, w, fromArray(be, Int32Array.of(1, 9, -100), [3], "i32"), 2)).toThrow(/targets\[1\] = 9 is outside \[0, 5\)/);
  });

  test("planTiles: tiles fit the budget and the device's binding; the Llama-3 and Qwen3 shapes", () => {
    const fake = (bind: number) => ({ device: { limits: { maxBufferSize: 2 ** 40, maxStorageBufferBindingSize: bind } } }) as unknown as Backend;
    const h200 = fake(2147483644);
    // T = 8192: every token in one chunk, 4096-wide tiles (128 MiB)
    expect(planTiles(h200, 8192, 128256)).toEqual({ chunkTokens: 8192, tileVocab: 4096 });
    expect(planTiles(h200, 8192, 151936)).toEqual({ chunkTokens: 8192, tileVocab: 4096 });
    // many tokens: chunked, tiles of 4096 columns
    expect(planTiles(h200, 100_003, 128256)).toEqual({ chunkTokens: 8192, tileVocab: 4096 });
    // few tokens: the whole vocabulary in one tile when it fits
    expect(planTiles(h200, 37, 151936)).toEqual({ chunkTokens: 37, tileVocab: 151936 });
    // a binding of 1 MiB bounds the tile below the budget
    const small = fake(2 ** 20);
    const pl = planTiles(small, 8191, 32003);
    expect(pl).toEqual({ chunkTokens: 64, tileVocab: 4096 }); // 2¹⁸ elements = 64 × 4096
    expect(4 * pl.chunkTokens * pl.tileVocab).toBeLessThanOrEqual(2 ** 20);
    expect(() => planTiles(small, 8191, 32003, { chunkTokens: 1024, tileVocab: 1024 })).toThrow(/4194304 bytes, above the device's largest binding of 1048576 bytes/);
    expect(planTiles(new CpuBackend(), 10, 20, { chunkTokens: 3, tileVocab: 7 })).toEqual({ chunkTokens: 3, tileVocab: 7 });
    // a webgpu backend's segment size (maxBindingBytes) is the binding that counts
    const lowered = { segmentElems: 1024, device: { limits: { maxBufferSize: 2 ** 40, maxStorageBufferBindingSize: 2147483644 } } } as unknown as Backend;
    expect(planTiles(lowered, 8192, 128256)).toEqual({ chunkTokens: 1, tileVocab: 1024 });
    expect(planTiles(lowered, 3, 5000)).toEqual({ chunkTokens: 1, tileVocab: 1024 });
    expect(() => planTiles(lowered, 3, 5000, { chunkTokens: 3, tileVocab: 1000 })).toThrow(/above the device's largest binding of 4096 bytes/);
  });

  test("auto-selected backend (webgpu where an adapter exists): fused = unfused and = the float64 reference", async () => {
    const { backend: be, reason } = await createBackend("auto", { choose: "first-adapter" });
    console.log(`linear-cross-entropy on ${be.info.name}: ${reason}`);
    for (const c of CASES) {
      const p = c.p();
      const fused = await run(be, p, "fused", c.opts);
      const unfused = await run(be, p, "unfused", c.opts);
      const ref = reference(p, c.opts.zLoss ?? 0);
      expectClose(`${be.info.name} ${c.name}: fused vs unfused`, fused, unfused, 1e-5, 1e-4);
      expectClose(`${be.info.name} ${c.name}: fused vs float64`, fused, ref, 1e-5, 1e-4);
    }
    const m = problem(17, 5, 31, "m", () => true);
    const r = await run(be, m, "fused", { chunkTokens: 4, tileVocab: 8 });
    expect(r.loss).toBe(0);
    expect(r.dh.every((v) => v === 0) && r.dw.every((v) => v === 0)).toBe(true);
    if (be.info.name !== "webgpu") return;
    // a binding lowered to 4 KiB (maxBindingBytes, segments of 1024 elements): the default plan
    // keeps every tile in one binding; case 0's weight (101 × 13) and its gradient are segmented
    const { backend: low } = await createBackend("webgpu", { maxBindingBytes: 4096 });
    for (const [c, z] of [[CASES[0]!, 0], [CASES[1]!, 0.01]] as const) {
      const p = c.p();
      const plan = planTiles(low, p.T, p.V);
      expect(plan.chunkTokens * plan.tileVocab).toBeLessThanOrEqual(1024);
      expect(plan.chunkTokens).toBeLessThan(p.T); // chunked because of the binding
      expectClose(`lowered binding, ${c.name}: fused vs float64`, await run(low, p, "fused", { zLoss: z }), reference(p, z), 1e-5, 1e-4);
    }
    (low as { destroy?: () => void }).destroy?.();
  }, 300_000);

  test("webgpu with tensor-core matmuls (emulated cooperative matrices, every product): fused = unfused and ≈ the float64 reference", async () => {
    const { backend: be } = await createBackend("auto", { choose: "first-adapter" });
    if (be.info.name !== "webgpu" || !be.info.features.includes("shader-f16")) {
      console.log(`linear-cross-entropy tensor cores: not run (${be.info.name}, features ${be.info.features.join(",")}: needs webgpu with shader-f16)`);
      return;
    }
    const { backend: tc } = await createBackend("webgpu", { tensorCores: "emulated", tensorCoreMinBlocks: 0 });
    // f16 operands (2⁻¹¹ relative each, per-tensor scaled) with f32 accumulation: the products carry
    // ~1e-3 relative error, so the loss is within 3e-3 and the gradients within 3e-2 of the reference;
    // fused and unfused share the logits products' rounding but not the gradient products'.
    for (const c of [CASES[0]!, CASES[2]!]) {
      const p = c.p();
      const fused = await run(tc, p, "fused", c.opts);
      const unfused = await run(tc, p, "unfused", c.opts);
      const ref = reference(p, c.opts.zLoss ?? 0);
      const e = (x: Float64Array, y: Float64Array) => normwiseErr(x, y).toExponential(2);
      console.log(`tensor cores ${c.name}: loss vs f64 ${(Math.abs(fused.loss - ref.loss) / ref.loss).toExponential(2)}, dh ${e(fused.dh, ref.dh)}, dw ${e(fused.dw, ref.dw)}; fused vs unfused dh ${e(fused.dh, unfused.dh)}, dw ${e(fused.dw, unfused.dw)}`);
      expectClose(`tensor cores ${c.name}: fused vs unfused`, fused, unfused, 3e-3, 3e-2);
      expectClose(`tensor cores ${c.name}: fused vs float64`, fused, ref, 3e-3, 3e-2);
    }
    (tc as { destroy?: () => void }).destroy?.();
  }, 300_000);
});
