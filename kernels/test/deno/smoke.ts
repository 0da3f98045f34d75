/**
 * Deno smoke test of WebGpuBackend on Deno's built-in `navigator.gpu` (wgpu inside), compared with
 * the TypeScript CpuBackend as reference. Run:
 *
 *   node_modules/.bin/deno run --allow-read kernels/test/deno/smoke.ts
 *
 * Prints one line per check and exits 1 on any mismatch (2 when no WebGPU adapter exists), so the
 * same WGSL and backend code is proven on a second WebGPU implementation besides our ffi binding.
 * Sizes are small and awkward (primes, non-multiples of the 64-wide tiles): lavapipe is slow.
 */
import type { Backend, Buf, DType, HostArray, View } from "../../src/backend.ts";
import { CpuBackend } from "../../src/cpu/index.ts";
import { randomF32 as rand } from "../../src/testing.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";

const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
if (!nav?.gpu) {
  console.error("smoke: navigator.gpu is missing (run under Deno)");
  (globalThis as unknown as { Deno: { exit(c: number): never } }).Deno.exit(2);
}


let failures = 0;
function report(name: string, got: ArrayLike<number>, want: ArrayLike<number>, rtol: number, atol: number): void {
  let worst = 0;
  let bad = 0;
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i]! - want[i]!);
    const bound = atol + rtol * Math.abs(want[i]!);
    if (!(err <= bound)) bad++;
    worst = Math.max(worst, err === 0 ? 0 : err / bound);
  }
  if (got.length !== want.length) bad = Math.max(bad, 1);
  const ok = bad === 0;
  if (!ok) failures++;
  console.log(`${ok ? "ok  " : "FAIL"} ${name}: ${want.length} values, worst error ${worst.toFixed(3)}× bound${ok ? "" : `, ${bad} out of tolerance`}`);
}

/** Runs `body` on both backends with the same inputs and returns what it reads back from each. */
async function both(gpu: Backend, cpu: Backend, body: (be: Backend, put: (d: DType, data: HostArray, off?: number) => View, out: (d: DType, n: number) => View) => Promise<HostArray[]>): Promise<[HostArray[], HostArray[]]> {
  const res: HostArray[][] = [];
  for (const be of [gpu, cpu]) {
    const bufs: Buf[] = [];
    const put = (d: DType, data: HostArray, off = 3): View => {
      const b = be.alloc(d, data.length + off + 2, "other");
      bufs.push(b);
      const v = { buf: b, off };
      be.write(v, data);
      return v;
    };
    const out = (d: DType, n: number): View => {
      const b = be.alloc(d, n + 5, "other");
      bufs.push(b);
      return { buf: b, off: 1 };
    };
    res.push(await body(be, put, out));
    for (const b of bufs) be.free(b);
  }
  return [res[0]!, res[1]!];
}

const gpu = await WebGpuBackend.create(nav!.gpu!);
const cpu = new CpuBackend();
console.log(`smoke: webgpu on "${gpu.info.adapter}" (${gpu.info.adapterType}) via Deno navigator.gpu`);

// matmul: batched, transB, accumulate, awkward sizes
{
  const [M, N, K, batch] = [37, 29, 67, 3];
  const A = rand(batch * M * K, 1);
  const B = rand(batch * N * K, 2);
  const C0 = rand(batch * M * N, 3);
  const [g, c] = await both(gpu, cpu, async (be, put) => {
    const a = put("f32", A);
    const b = put("f32", B);
    const o = put("f32", C0);
    be.matmul(a, b, o, { M, N, K, batch, transB: true, accumulate: true });
    return [await be.read(o, C0.length)];
  });
  report("matmul 3×(37×67·(29×67)ᵀ) accumulate", g[0]!, c[0]!, 1e-4, 1e-4);
}

// softmax and log-softmax, forward and backward
for (const log of [false, true]) {
  const [rows, cols] = [7, 131];
  const X = rand(rows * cols, 4).map((v) => v * 20);
  const DY = rand(rows * cols, 5);
  const [g, c] = await both(gpu, cpu, async (be, put, out) => {
    const x = put("f32", X);
    const dy = put("f32", DY);
    const y = out("f32", rows * cols);
    const dx = out("f32", rows * cols);
    be.softmax(x, y, rows, cols, log);
    be.softmaxBackward(y, dy, dx, rows, cols, log);
    return [await be.read(y, rows * cols), await be.read(dx, rows * cols)];
  });
  report(`${log ? "log-" : ""}softmax 7×131`, g[0]!, c[0]!, 1e-5, 1e-6);
  report(`${log ? "log-" : ""}softmax backward`, g[1]!, c[1]!, 1e-4, 1e-5);
}

// AdamW with a bf16 copy of the params and f16 gradients
{
  const n = 1001;
  const P = rand(n, 6);
  const M = rand(n, 7).map((v) => v * 0.1);
  const V = rand(n, 8).map((v) => Math.abs(v) * 0.01);
  const G16 = new Uint16Array(n);
  {
    const tmp = new CpuBackend();
    const gf = tmp.alloc("f32", n, "other");
    const gh = tmp.alloc("f16", n, "other");
    tmp.write({ buf: gf, off: 0 }, rand(n, 9));
    tmp.cast({ buf: gf, off: 0 }, { buf: gh, off: 0 }, n);
    G16.set((await tmp.read({ buf: gh, off: 0 }, n)) as Uint16Array);
  }
  const hp = { lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, decoupled: true, step: 5, gradScale: 0.5 };
  const [g, c] = await both(gpu, cpu, async (be, put, out) => {
    const p = put("f32", P);
    const gr = put("f16", G16);
    const m = put("f32", M);
    const v = put("f32", V);
    const p16 = out("bf16", n);
    be.adamw(p, gr, m, v, p16, n, hp);
    return [await be.read(p, n), await be.read(m, n), await be.read(v, n), await be.read(p16, n)];
  });
  report("adamw params", g[0]!, c[0]!, 1e-6, 1e-7);
  report("adamw m", g[1]!, c[1]!, 1e-5, 1e-7);
  report("adamw v", g[2]!, c[2]!, 1e-5, 1e-10);
  // the bf16 copy may differ by one unit in the last place where the f32 params differ by an ulp
  const gb = g[3]! as Uint16Array;
  const cb = c[3]! as Uint16Array;
  report("adamw bf16 param copy (bits, ±1)", Array.from(gb, (h, i) => (Math.abs(h - cb[i]!) <= 1 ? cb[i]! : h)), Array.from(cb), 0, 0);
}

// attention forward and backward (GQA) against the cpu backend; S crosses two 16-blocks
{
  const [B, S, H, Hkv, D] = [1, 37, 4, 2, 24];
  const Q = rand(B * S * H * D, 10);
  const Kt = rand(B * S * Hkv * D, 11);
  const Vt = rand(B * S * Hkv * D, 12);
  const DO = rand(B * S * H * D, 13);
  const [g, c] = await both(gpu, cpu, async (be, put, out) => {
    const q = put("f32", Q);
    const k = put("f32", Kt);
    const v = put("f32", Vt);
    const o = out("f32", Q.length);
    const lse = out("f32", B * H * S);
    be.attention(q, k, v, o, lse, B, S, H, Hkv, D, 1 / Math.sqrt(D));
    const dout = put("f32", DO);
    const dq = out("f32", Q.length);
    const dk = out("f32", Kt.length);
    const dv = out("f32", Vt.length);
    be.attentionBackward(q, k, v, o, lse, dout, dq, dk, dv, B, S, H, Hkv, D, 1 / Math.sqrt(D));
    return [await be.read(o, Q.length), await be.read(lse, B * H * S), await be.read(dq, Q.length), await be.read(dk, Kt.length), await be.read(dv, Vt.length)];
  });
  report("attention out", g[0]!, c[0]!, 1e-4, 1e-5);
  report("attention lse", g[1]!, c[1]!, 1e-5, 1e-5);
  report("attention backward dq", g[2]!, c[2]!, 1e-3, 1e-5);
  report("attention backward dk", g[3]!, c[3]!, 1e-3, 1e-5);
  report("attention backward dv", g[4]!, c[4]!, 1e-3, 1e-5);
}

gpu.destroy();
console.log(failures === 0 ? "smoke: all checks passed" : `smoke: ${failures} check(s) FAILED`);
if (failures > 0) (globalThis as unknown as { Deno: { exit(c: number): never } }).Deno.exit(1);
