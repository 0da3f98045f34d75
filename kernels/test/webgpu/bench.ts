/**
 * Throughput of WebGpuBackend ops on the first adapter (wall clock around flush(), after a warm-up
 * run; each figure is the mean over `reps` runs recorded back to back).
 *
 *   bun kernels/test/webgpu/bench.ts            # full sizes (a real GPU)
 *   bun kernels/test/webgpu/bench.ts --small    # sizes for lavapipe (2 CPU cores)
 *   --only=<substring>   run only the ops whose line starts with it (e.g. --only=attention)
 *   --attention=rows     use the one-row-per-workgroup attention kernels instead of the tiled ones
 *   --profile            also print GPU time per kernel from timestamp queries (one pass per
 *                        dispatch, so the wall-clock figures above get a little worse)
 *
 * Prints one line per op: time per call, and GB/s (bytes each call must read and write at least)
 * or GFLOP/s. Also the host cost of recording one small dispatch.
 */
import type { Buf, View } from "../../src/backend.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";

const small = process.argv.includes("--small");
const only = process.argv.find((a) => a.startsWith("--only="))?.slice(7);
const attention = process.argv.includes("--attention=rows") ? "rows" : "auto";
const profile = process.argv.includes("--profile");
const be = await WebGpuBackend.create(createGPU(), { powerPreference: "high-performance", attention, profile });
console.log(`bench: ${be.info.adapter} (${be.info.adapterType}, ${be.info.adapterBackend})${small ? " [small sizes]" : ""}, attention kernels: ${attention === "rows" ? "per-row" : "tiled"}`);
{
  const l = be.device.limits;
  console.log(`limits: maxBufferSize ${l.maxBufferSize}, maxStorageBufferBindingSize ${l.maxStorageBufferBindingSize}, maxComputeWorkgroupStorageSize ${l.maxComputeWorkgroupStorageSize}, maxStorageBuffersPerShaderStage ${l.maxStorageBuffersPerShaderStage}`);
}

const live: Buf[] = [];
function buf(dtype: "f32" | "bf16" | "i32", n: number, fill?: (i: number) => number): View {
  const b = be.alloc(dtype, n, "other");
  live.push(b);
  if (dtype === "f32") be.write({ buf: b, off: 0 }, Float32Array.from({ length: n }, (_, i) => (fill ? fill(i) : Math.sin(i * 0.37) * 0.5)));
  else if (dtype === "i32") be.write({ buf: b, off: 0 }, Int32Array.from({ length: n }, (_, i) => (fill ? fill(i) : i)));
  return { buf: b, off: 0 };
}

async function time(name: string, reps: number, body: () => void, units: { bytes?: number; flops?: number }): Promise<void> {
  if (only && !name.startsWith(only)) {
    for (const b of live.splice(0)) be.free(b);
    return;
  }
  body();
  await be.flush();
  const t0 = performance.now();
  for (let r = 0; r < reps; r++) body();
  await be.flush();
  const s = (performance.now() - t0) / 1000 / reps;
  const rate = units.flops ? `${(units.flops / s / 1e9).toFixed(1)} GFLOP/s` : `${((units.bytes ?? 0) / s / 1e9).toFixed(1)} GB/s`;
  console.log(`${name.padEnd(46)} ${(s * 1e3).toFixed(3).padStart(9)} ms   ${rate}`);
  for (const b of live.splice(0)) be.free(b);
}

const S = small ? 1 / 16 : 1;
const R = small ? 2 : 10;

{
  const n = small ? 256 : 4096;
  const a = buf("f32", n * n);
  const b = buf("f32", n * n);
  const c = buf("f32", n * n);
  await time(`matmul f32 ${n}³`, small ? 1 : 5, () => be.matmul(a, b, c, { M: n, N: n, K: n }), { flops: 2 * n * n * n });
}
{
  const rows = Math.round(8192 * S);
  const cols = 32000;
  const x = buf("f32", rows * cols);
  const y = buf("f32", rows * cols);
  await time(`softmax ${rows}×${cols}`, R, () => be.softmax(x, y, rows, cols, false), { bytes: 8 * rows * cols });
  const t = buf("i32", rows, (i) => (i * 7919) % cols);
  const l = buf("f32", rows);
  const dl = buf("f32", rows * cols);
  const x2 = buf("f32", rows * cols);
  await time(`crossEntropy ${rows}×${cols}`, R, () => be.crossEntropy(x2, t, l, dl, rows, cols, -100, 1 / rows), { bytes: 8 * rows * cols });
}
{
  const rows = Math.round(8192 * S);
  const cols = 4096;
  const x = buf("f32", rows * cols);
  const w = buf("f32", cols);
  const y = buf("f32", rows * cols);
  const r = buf("f32", rows);
  await time(`rmsnorm ${rows}×${cols}`, R, () => be.rmsnorm(x, w, y, r, rows, cols, 1e-5), { bytes: 8 * rows * cols });
  const x2 = buf("f32", rows * cols);
  const w2 = buf("f32", cols);
  const r2 = buf("f32", rows);
  const dy = buf("f32", rows * cols);
  const dx = buf("f32", rows * cols);
  const dw = buf("f32", cols);
  be.rmsnorm(x2, w2, buf("f32", rows * cols), r2, rows, cols, 1e-5);
  await time(`rmsnormBackward ${rows}×${cols}`, R, () => be.rmsnormBackward(x2, w2, r2, dy, dx, dw, rows, cols), { bytes: 16 * rows * cols });
}
{
  const rows = Math.round(8192 * S);
  const cols = 4096;
  const x = buf("f32", rows * cols);
  const o = buf("f32", cols);
  await time(`reduce sum over rows ${rows}×${cols}`, R, () => be.reduce("sum", x, o, 1, rows, cols), { bytes: 4 * rows * cols });
  const x2 = buf("f32", rows * cols);
  const o2 = buf("f32", rows);
  await time(`reduce sum over cols ${rows}×${cols}`, R, () => be.reduce("sum", x2, o2, rows, cols, 1), { bytes: 4 * rows * cols });
}
{
  const n = Math.round(64 * 2 ** 20 * S);
  const p = buf("f32", n);
  const g = buf("f32", n);
  const m = buf("f32", n);
  const v = buf("f32", n, () => 0.01);
  const p16 = buf("bf16", n);
  const hp = { lr: 1e-4, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, decoupled: true, step: 3, gradScale: 1 };
  await time(`adamw ${n} (f32 + bf16 copy)`, R, () => be.adamw(p, g, m, v, p16, n, hp), { bytes: n * (4 * 7 + 2) });
  const out = buf("f32", 1);
  const x = buf("f32", n);
  await time(`sumSquares ${n}`, R, () => be.sumSquares(x, out, n), { bytes: 4 * n });
  const y = buf("f32", n);
  const x3 = buf("f32", n);
  await time(`axpy ${n}`, R, () => be.axpy(0.5, x3, y, n), { bytes: 12 * n });
  const src = buf("f32", n);
  const dst = buf("bf16", n);
  await time(`cast f32→bf16 ${n}`, R, () => be.cast(src, dst, n), { bytes: 6 * n });
}
{
  const [B, Sq, H, D] = small ? [1, 128, 4, 64] : [8, 1024, 16, 64];
  const nq = B * Sq * H * D;
  const q = buf("f32", nq);
  const k = buf("f32", nq);
  const v = buf("f32", nq);
  const o = buf("f32", nq);
  const lse = buf("f32", B * H * Sq);
  const flops = 4 * B * H * Sq * Sq * D / 2; // causal: half of QKᵀ and PV
  await time(`attention fwd B${B} S${Sq} H${H} D${D}`, small ? 1 : 5, () => be.attention(q, k, v, o, lse, B, Sq, H, H, D, 0.125), { flops });
  const q2 = buf("f32", nq);
  const k2 = buf("f32", nq);
  const v2 = buf("f32", nq);
  const o2 = buf("f32", nq);
  const l2 = buf("f32", B * H * Sq);
  be.attention(q2, k2, v2, o2, l2, B, Sq, H, H, D, 0.125);
  const dout = buf("f32", nq);
  const dq = buf("f32", nq);
  const dk = buf("f32", nq);
  const dv = buf("f32", nq);
  await time(`attention bwd B${B} S${Sq} H${H} D${D}`, small ? 1 : 5, () => be.attentionBackward(q2, k2, v2, o2, l2, dout, dq, dk, dv, B, Sq, H, H, D, 0.125), { flops: 2.5 * flops });
}
{
  const n = Math.round(8192 * S);
  const dim = 1024;
  const vocab = 32000;
  const ids = buf("i32", n, (i) => (i * 2654435761) % vocab >>> 0);
  const table = buf("f32", vocab * dim);
  const out = buf("f32", n * dim);
  await time(`embedding ${n}×${dim}`, R, () => be.embedding(table, ids, out, n, dim), { bytes: 8 * n * dim });
  const dout = buf("f32", n * dim);
  const ids2 = buf("i32", n, (i) => (i * 2654435761) % vocab >>> 0);
  const dt = buf("f32", vocab * dim);
  await time(`embeddingBackward ${n}×${dim}`, R, () => be.embeddingBackward(dout, ids2, dt, n, dim), { bytes: 12 * n * dim });
}
{
  const x = buf("f32", 256);
  const y = buf("f32", 256);
  const n = 5000;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) be.axpy(0.5, x, y, 256);
  const t1 = performance.now();
  await be.flush();
  const t2 = performance.now();
  console.log(`dispatch overhead: record ${(((t1 - t0) / n) * 1e3).toFixed(1)} µs/op, record+run ${(((t2 - t0) / n) * 1e3).toFixed(1)} µs/op (${n} axpy of 256)`);
}
console.log(JSON.stringify(be.stats()));
if (profile) for (const k of await be.profile()) console.log(`gpu ${k.label.padEnd(40)} ${String(k.dispatches).padStart(6)} dispatches ${(k.ns / 1e6).toFixed(3).padStart(10)} ms`);
be.destroy();
