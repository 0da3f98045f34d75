/**
 * Time each backend op a Llama/Mixtral training step issues, at the step's real shapes, to see
 * which ops dominate (each op timed alone: warm-up, then `reps` calls, one flush).
 *
 *   bun core/bench/op-profile.ts [--backend auto|cpu|webgpu] [--hidden 768] [--inter 2048]
 *       [--heads 12] [--kv-heads 4] [--vocab 32000] [--batch 8] [--seq 512] [--experts 8] [--topk 2] [--reps 5]
 *
 * Prints one JSON line per op: milliseconds per call and, for matmuls, TFLOP/s.
 */
import type { Backend, View } from "@zeromoe/kernels";
import { createBackend, type BackendKind } from "@zeromoe/kernels";

function arg(name: string, def: string): number {
  const i = process.argv.indexOf(`--${name}`);
  return Number(i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def);
}
const kindIdx = process.argv.indexOf("--backend");
const { backend: be, reason } = await createBackend((kindIdx >= 0 ? process.argv[kindIdx + 1] : "auto") as BackendKind);
console.error(reason);
const H = arg("hidden", "768");
const I = arg("inter", "2048");
const NH = arg("heads", "12");
const KV = arg("kv-heads", "4");
const V = arg("vocab", "32000");
const B = arg("batch", "8");
const S = arg("seq", "512");
const E = arg("experts", "8");
const K = arg("topk", "2");
const reps = arg("reps", "5");
const D = H / NH;
const T = B * S;

const bufs: ReturnType<Backend["alloc"]>[] = [];
function f32(n: number, fill = 0.01): View {
  const b = be.alloc("f32", Math.max(n, 1), "other");
  bufs.push(b);
  be.fill({ buf: b, off: 0 }, fill, n);
  return { buf: b, off: 0 };
}
function i32(n: number, mod: number): View {
  const b = be.alloc("i32", n, "other");
  bufs.push(b);
  be.write({ buf: b, off: 0 }, Int32Array.from({ length: n }, (_, i) => (i * 7919) % mod));
  return { buf: b, off: 0 };
}

async function time(name: string, fn: () => void, flops = 0): Promise<void> {
  fn();
  await be.flush();
  const t0 = performance.now();
  for (let r = 0; r < reps; r++) fn();
  await be.flush();
  const ms = (performance.now() - t0) / reps;
  console.log(JSON.stringify({ op: name, ms: +ms.toFixed(3), ...(flops ? { tflops: +(flops / ms / 1e9).toFixed(2) } : {}) }));
  for (const b of bufs.splice(0)) be.free(b);
}

const mm = (name: string, M: number, N: number, Kd: number, transA = false, transB = false, accumulate = false) =>
  time(`matmul ${name} M${M} N${N} K${Kd}${transA ? " tA" : ""}${transB ? " tB" : ""}${accumulate ? " acc" : ""}`, (() => {
    const a = f32(M * Kd), b = f32(Kd * N), c = f32(M * N);
    return () => be.matmul(a, b, c, { M, N, K: Kd, transA, transB, accumulate });
  })(), 2 * M * N * Kd);

await mm("mlp fwd", T, I, H, false, true);
await mm("mlp dX", T, H, I);
await mm("mlp dW", I, H, T, true, false, true);
await mm("head fwd", T, V, H, false, true);
await mm("head dX", T, H, V);
await mm("head dW", V, H, T, true, false, true);
{
  const q = f32(T * NH * D), k = f32(T * KV * D), v = f32(T * KV * D), o = f32(T * NH * D), lse = f32(B * NH * S);
  await time(`attention B${B} S${S} H${NH} Hkv${KV} D${D}`, () => be.attention(q, k, v, o, lse, B, S, NH, KV, D, 1 / Math.sqrt(D)), 2 * 2 * B * NH * S * S * D / 2);
}
{
  const q = f32(T * NH * D), k = f32(T * KV * D), v = f32(T * KV * D), o = f32(T * NH * D), lse = f32(B * NH * S);
  be.attention(q, k, v, o, lse, B, S, NH, KV, D, 1 / Math.sqrt(D));
  const dO = f32(T * NH * D), dq = f32(T * NH * D), dk = f32(T * KV * D), dv = f32(T * KV * D);
  await time("attentionBackward", () => be.attentionBackward(q, k, v, o, lse, dO, dq, dk, dv, B, S, NH, KV, D, 1 / Math.sqrt(D)), 2 * 5 * B * NH * S * S * D / 2);
}
{
  const x = f32(T * NH * D), y = f32(T * NH * D);
  await time("rope", () => be.rope(x, y, B, S, NH, D, 10000, false));
}
{
  const lg = f32(T * V), t = i32(T, V), l = f32(T), dl = f32(T * V);
  await time(`crossEntropy ${T}x${V}`, () => be.crossEntropy(lg, t, l, dl, T, V, -100, 1 / T));
}
{
  const tab = f32(V * H), ids = i32(T, V), out = f32(T * H);
  await time("embedding", () => be.embedding(tab, ids, out, T, H));
  const dt = f32(V * H), dout = f32(T * H), ids2 = i32(T, V);
  await time("embeddingBackward", () => be.embeddingBackward(dout, ids2, dt, T, H));
}
{
  const x = f32(T * H), w = f32(H, 1), y = f32(T * H), r = f32(T);
  await time("rmsnorm", () => be.rmsnorm(x, w, y, r, T, H, 1e-6));
  const x2 = f32(T * H), w2 = f32(H, 1), r2 = f32(T), dy = f32(T * H), dx = f32(T * H), dw = f32(H);
  be.rmsnorm(x2, w2, f32(T * H), r2, T, H, 1e-6);
  await time("rmsnormBackward", () => be.rmsnormBackward(x2, w2, r2, dy, dx, dw, T, H));
}
{
  const a = f32(T * I), b = f32(T * I), c = f32(T * I);
  await time(`binary mul ${T}x${I}`, () => be.binary("mul", a, [T, I], b, [T, I], c));
  const x = f32(T * I), y = f32(T * I);
  await time("unary silu", () => be.unary("silu", x, y, T * I));
  const x2 = f32(T * I), dy = f32(T * I), dx = f32(T * I);
  await time("unaryBackward silu", () => be.unaryBackward("silu", x2, dy, dx, T * I));
  const s = f32(T * I), d = f32(T * I);
  await time("copy", () => be.copy(s, d, T * I));
  const s2 = f32(T * I), d2 = f32(T * I);
  await time("axpy", () => be.axpy(1, s2, d2, T * I));
}
{
  const x = f32(T * E), y = f32(T * E);
  await time(`softmax ${T}x${E}`, () => be.softmax(x, y, T, E, false));
  const x2 = f32(T * E), vals = f32(T * K), idx = be.alloc("i32", T * K, "other");
  bufs.push(idx);
  await time("topk", () => be.topk(x2, vals, { buf: idx, off: 0 }, T, E, K));
  const src = f32(T * H), gi = i32(T * K, T), dst = f32(T * K * H);
  await time(`gatherRows ${T * K}x${H}`, () => be.gatherRows(src, gi, dst, T * K, H));
  const ys = f32(T * K * H), si = i32(T * K, T), w = f32(T * K), out = f32(T * H);
  await time(`scatterAddRows ${T * K}x${H}`, () => be.scatterAddRows(ys, si, w, out, T * K, H));
  const ids = i32(T * K, E), cnt = be.alloc("u32", E, "other");
  bufs.push(cnt);
  await time("histogram", () => be.histogram(ids, { buf: cnt, off: 0 }, T * K, E));
  const red = f32(T * H), ro = f32(H);
  await time(`reduce sum over ${T} rows`, () => be.reduce("sum", red, ro, 1, T, H));
}
