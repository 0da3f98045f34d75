/**
 * A Llama-3-70B-shaped embedding / LM head held in several bindings, checked against host
 * references on the rows around every segment boundary: allocation and exact accounting, the
 * device's Philox init (bit-identical to the cpu backend's, so reference rows come from it),
 * embedding lookup and backward, the head's logits x·Wᵀ, its weight gradient dlogitsᵀ·x written
 * over segments, dX = dlogits·W reading W's column blocks, and one AdamW step.
 *
 * The default sizes run anywhere (lavapipe: a [2053, 61] table on 64 KiB bindings). On a GPU, the
 * real shape with the device's own limit:
 *
 *   ZEROMOE_LARGE_VOCAB=128256 ZEROMOE_LARGE_DIM=8192 ZEROMOE_LARGE_BINDING=device \
 *     bun test kernels/test/webgpu/large-tensor.test.ts
 *
 * (4.2 GB of f32 per tensor: 2 segments of 536870908 elements at the H200's 2147483644-byte
 * binding; about 17 GB of device memory in all.)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { View } from "../../src/backend.ts";
import { CpuBackend } from "../../src/cpu/index.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { GpuBuf } from "../../src/webgpu/buffers.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";

const V = Number(process.env.ZEROMOE_LARGE_VOCAB ?? 2053);
const D = Number(process.env.ZEROMOE_LARGE_DIM ?? 61);
const BINDING = process.env.ZEROMOE_LARGE_BINDING ?? "65536";
/** Token rows of the head's input. */
const M = 16;
const KEY: [number, number] = [0x2545f491, 0x9e3779b9];

let gpu: WebGpuBackend;
const cpu = new CpuBackend();

beforeAll(async () => {
  gpu = await WebGpuBackend.create(createGPU(), BINDING === "device" ? {} : { maxBindingBytes: Number(BINDING) });
});
afterAll(() => gpu.destroy());

/** Rows checked: the first and last, and the rows at and around every segment boundary (the one
 * holding the boundary straddles it unless D divides it). */
function checkRows(S: number): number[] {
  const rows = new Set<number>([0, 1, V - 1]);
  for (let b = S; b < V * D; b += S) {
    const r = Math.floor(b / D);
    for (const q of [r - 1, r, r + 1]) if (q >= 0 && q < V) rows.add(q);
  }
  return [...rows].sort((a, b) => a - b);
}

/** Row r of the table as the cpu backend's Philox init makes it (bit-identical to the device's). */
async function refRow(r: number): Promise<Float32Array> {
  const b = cpu.alloc("f32", D, "other");
  cpu.randomFill({ buf: b, off: 0 }, D, { dist: "normal", key: KEY, start: r * D, std: 0.02 });
  const v = (await cpu.read({ buf: b, off: 0 }, D)) as Float32Array;
  cpu.free(b);
  return Float32Array.from(v);
}

function expectBits(got: Float32Array, want: Float32Array, what: string): void {
  const a = new Uint32Array(got.buffer, got.byteOffset, got.length);
  const b = new Uint32Array(want.buffer, want.byteOffset, want.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) throw new Error(`${what}: element ${i}: got ${got[i]}, want ${want[i]}`);
}

/** |got − want| ≤ 1e-5·Σ|terms| + 1e-7 (f32 accumulation of a dot product, terms given). */
function expectDot(got: number, want: number, absSum: number, what: string): void {
  if (!(Math.abs(got - want) <= 1e-5 * absSum + 1e-7)) throw new Error(`${what}: got ${got}, want ${want} (Σ|terms| ${absSum})`);
}

describe(`a [${V}, ${D}] f32 embedding / LM head over several bindings (binding ${BINDING})`, () => {
  test("allocation, init, lookup, head forward/backward and AdamW at the rows around every boundary", async () => {
    const S = gpu.segmentElems;
    const n = V * D;
    const before = gpu.memory().current.param;
    const table = gpu.alloc("f32", n, "param", "any");
    const segs = (table as GpuBuf).segments?.length ?? 1;
    console.log(`[${V}, ${D}] f32 = ${n * 4} bytes in ${segs} segments of ${S} elements on ${gpu.info.adapter}`);
    expect(segs).toBe(Math.ceil(n / S));
    expect(segs).toBeGreaterThanOrEqual(2);
    expect(gpu.memory().current.param - before).toBe(n * 4);
    const T: View = { buf: table, off: 0 };
    gpu.randomFill(T, n, { dist: "normal", key: KEY, start: 0, std: 0.02 });
    const rows = checkRows(S);
    const ref = new Map<number, Float32Array>();
    for (const r of rows) ref.set(r, await refRow(r));
    for (const r of rows) expectBits((await gpu.read({ buf: table, off: r * D }, D)) as Float32Array, ref.get(r)!, `table row ${r} (device init vs host)`);

    // embedding lookup of the checked rows (and an invalid id → zeros)
    const ids = Int32Array.from([...rows, -1, ...rows.slice().reverse()]);
    const idb = gpu.alloc("i32", ids.length, "other");
    gpu.write({ buf: idb, off: 0 }, ids);
    const emb = gpu.alloc("f32", ids.length * D, "activation");
    gpu.embedding(T, { buf: idb, off: 0 }, { buf: emb, off: 0 }, ids.length, D);
    const embOut = (await gpu.read({ buf: emb, off: 0 }, ids.length * D)) as Float32Array;
    ids.forEach((id, i) => expectBits(embOut.subarray(i * D, (i + 1) * D), id < 0 ? new Float32Array(D) : ref.get(id)!, `embedding row ${i} (id ${id})`));

    // head forward: logits [M, V] = x · Wᵀ (W transposed, its rows over segments)
    const x = gpu.alloc("f32", M * D, "activation");
    gpu.randomFill({ buf: x, off: 0 }, M * D, { dist: "uniform", key: [7, 8], start: 0, lo: -1, hi: 1 });
    const xs = (await gpu.read({ buf: x, off: 0 }, M * D)) as Float32Array;
    const logits = gpu.alloc("f32", M * V, "activation");
    gpu.matmul({ buf: x, off: 0 }, T, { buf: logits, off: 0 }, { M, N: V, K: D, transB: true });
    const lg = (await gpu.read({ buf: logits, off: 0 }, M * V)) as Float32Array;
    for (const r of rows)
      for (let m = 0; m < M; m++) {
        let s = 0;
        let a = 0;
        for (let k = 0; k < D; k++) {
          const t = xs[m * D + k]! * ref.get(r)![k]!;
          s += t;
          a += Math.abs(t);
        }
        expectDot(lg[m * V + r]!, s, a, `logits[${m}, ${r}]`);
      }

    // head backward: dlogits non-zero only at the checked columns, so host references are cheap
    const dl = new Float32Array(M * V);
    let seed = 1;
    for (const r of rows) for (let m = 0; m < M; m++) dl[m * V + r] = ((seed = (seed * 48271) % 2147483647) / 2147483647) * 2 - 1;
    const dlb = gpu.alloc("f32", M * V, "activation");
    gpu.write({ buf: dlb, off: 0 }, dl);
    // dW [V, D] = dlogitsᵀ · x, written over the segments of a gradient buffer
    const dw = gpu.alloc("f32", n, "grad");
    gpu.matmul({ buf: dlb, off: 0 }, { buf: x, off: 0 }, { buf: dw, off: 0 }, { M: V, N: D, K: M, transA: true });
    for (const r of rows) {
      const got = (await gpu.read({ buf: dw, off: r * D }, D)) as Float32Array;
      for (let k = 0; k < D; k++) {
        let s = 0;
        let a = 0;
        for (let m = 0; m < M; m++) {
          const t = dl[m * V + r]! * xs[m * D + k]!;
          s += t;
          a += Math.abs(t);
        }
        expectDot(got[k]!, s, a, `dW[${r}, ${k}]`);
      }
    }
    // dX [M, D] = dlogits · W (W untransposed: column blocks gathered from its segments)
    const dx = gpu.alloc("f32", M * D, "activation");
    gpu.matmul({ buf: dlb, off: 0 }, T, { buf: dx, off: 0 }, { M, N: D, K: V });
    const dxs = (await gpu.read({ buf: dx, off: 0 }, M * D)) as Float32Array;
    for (let m = 0; m < M; m++)
      for (let k = 0; k < D; k++) {
        let s = 0;
        let a = 0;
        for (const r of rows) {
          const t = dl[m * V + r]! * ref.get(r)![k]!;
          s += t;
          a += Math.abs(t);
        }
        expectDot(dxs[m * D + k]!, s, a, `dX[${m}, ${k}]`);
      }
    // embedding backward adds the looked-up rows' gradients into dW (deterministic, in order)
    const dEmb = gpu.alloc("f32", ids.length * D, "activation");
    gpu.randomFill({ buf: dEmb, off: 0 }, ids.length * D, { dist: "uniform", key: [9, 10], start: 0, lo: -1, hi: 1 });
    const dEmbH = (await gpu.read({ buf: dEmb, off: 0 }, ids.length * D)) as Float32Array;
    const dwBefore = new Map<number, Float32Array>();
    for (const r of rows) dwBefore.set(r, Float32Array.from((await gpu.read({ buf: dw, off: r * D }, D)) as Float32Array));
    gpu.embeddingBackward({ buf: dEmb, off: 0 }, { buf: idb, off: 0 }, { buf: dw, off: 0 }, ids.length, D);
    for (const r of rows) {
      const want = Float32Array.from(dwBefore.get(r)!);
      ids.forEach((id, i) => {
        if (id === r) for (let k = 0; k < D; k++) want[k] = Math.fround(want[k]! + dEmbH[i * D + k]!);
      });
      expectBits((await gpu.read({ buf: dw, off: r * D }, D)) as Float32Array, want, `dW row ${r} after embeddingBackward`);
    }

    // one AdamW step over the whole table (m, v over segments too) against the cpu backend's step
    // of the checked rows
    const mm = gpu.alloc("f32", n, "optim");
    const vv = gpu.alloc("f32", n, "optim");
    const hp = { lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, decoupled: true, step: 1, gradScale: 1 };
    gpu.adamw(T, { buf: dw, off: 0 }, { buf: mm, off: 0 }, { buf: vv, off: 0 }, null, n, hp);
    for (const r of rows) {
      const p = cpu.alloc("f32", D, "other");
      const g = cpu.alloc("f32", D, "other");
      const m1 = cpu.alloc("f32", D, "other");
      const v1 = cpu.alloc("f32", D, "other");
      cpu.write({ buf: p, off: 0 }, ref.get(r)!);
      cpu.write({ buf: g, off: 0 }, (await gpu.read({ buf: dw, off: r * D }, D)) as Float32Array);
      cpu.adamw({ buf: p, off: 0 }, { buf: g, off: 0 }, { buf: m1, off: 0 }, { buf: v1, off: 0 }, null, D, hp);
      const want = (await cpu.read({ buf: p, off: 0 }, D)) as Float32Array;
      const got = (await gpu.read({ buf: table, off: r * D }, D)) as Float32Array;
      for (let k = 0; k < D; k++) if (!(Math.abs(got[k]! - want[k]!) <= 1e-6 * Math.abs(want[k]!) + 1e-9)) throw new Error(`adamw row ${r}[${k}]: got ${got[k]}, want ${want[k]}`);
      for (const b of [p, g, m1, v1]) cpu.free(b);
    }
    for (const b of [table, idb, emb, x, logits, dlb, dw, dx, dEmb, mm, vv]) gpu.free(b);
    expect(gpu.memory().current.param).toBe(before);
  }, 600_000);
});
