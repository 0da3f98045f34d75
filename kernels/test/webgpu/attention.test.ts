/**
 * The fused (flash) attention kernels (wgsl/attention-flash.ts, the default) and the older tiled
 * kernels (wgsl/attention-tiled.ts) against the one-row-per-workgroup kernels (wgsl/attention.ts)
 * and the cpu backend, at sequence lengths that cross several blocks and end mid-block, one token,
 * grouped-query ratios 1, 2, 4 and H, and head dims that are not multiples of 4 or pick different
 * block sizes; plus the block choices themselves. The scheduling options of the flash blocks
 * (register prefetch, heavy blocks first) and compiling them without naga's runtime checks
 * (trustedShaders) must leave every bit unchanged.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Backend, View } from "../../src/backend.ts";
import { CpuBackend } from "../../src/cpu/index.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { randomF32 as rand } from "../../src/testing.ts";
import { attentionTileBytes, chooseAttentionBlock } from "../../src/wgsl/attention-tiled.ts";
import { chooseFlashBlocks, FLASH_BLOCKS, FLASH_PREFETCH_MAX_SLOTS, type FlashBlock, flashBlockName, flashPrefetchSlots, flashTileBytes } from "../../src/wgsl/attention-flash.ts";

let flash: WebGpuBackend;
let flash2: WebGpuBackend;
let flash2ph: WebGpuBackend;
let trusted: WebGpuBackend;
let tiled: WebGpuBackend;
let rows: WebGpuBackend;
const cpu = new CpuBackend();
beforeAll(async () => {
  const g = createGPU();
  // compiled with naga's runtime checks (the default compiles the flash kernels trusted where it can)
  flash = await WebGpuBackend.create(g, { trustedShaders: [] });
  // two rows per invocation, smaller blocks (tuning variants)
  const r2 = (rows: number, cols: number): FlashBlock => ({ rows, cols, rpt: 2 });
  flash2 = await WebGpuBackend.create(g, { attentionBlocks: { fwd: r2(32, 16), dq: r2(16, 16), dkv: r2(32, 16) } });
  // the same blocks with register prefetch and heavy-first order (the default blocks have both)
  const r2ph = (rows: number, cols: number): FlashBlock => ({ rows, cols, rpt: 2, prefetch: true, heavyFirst: true });
  flash2ph = await WebGpuBackend.create(g, { attentionBlocks: { fwd: r2ph(32, 16), dq: r2ph(16, 16), dkv: r2ph(32, 16) } });
  // the default blocks compiled without naga's bounds clamping and loop bounding
  trusted = await WebGpuBackend.create(g, { trustedShaders: ["attention_flash_"] });
  tiled = await WebGpuBackend.create(g, { attention: "tiled" });
  rows = await WebGpuBackend.create(g, { attention: "rows" });
});
afterAll(() => {
  flash.destroy();
  flash2.destroy();
  flash2ph.destroy();
  trusted.destroy();
  tiled.destroy();
  rows.destroy();
});

/** Forward + backward on `be`; returns out, lse, dq, dk, dv. */
async function run(be: Backend, B: number, S: number, H: number, Hkv: number, D: number, seed: number): Promise<Float32Array[]> {
  const nq = B * S * H * D;
  const nk = B * S * Hkv * D;
  const bufs: View[] = [];
  const put = (data: Float32Array): View => {
    const v = { buf: be.alloc("f32", data.length + 2, "other"), off: 2 };
    be.write(v, data);
    bufs.push(v);
    return v;
  };
  const q = put(rand(nq, seed));
  const k = put(rand(nk, seed + 1));
  const v = put(rand(nk, seed + 2));
  const dout = put(rand(nq, seed + 3));
  const out = put(new Float32Array(nq));
  const lse = put(new Float32Array(B * H * S));
  const dq = put(new Float32Array(nq));
  const dk = put(new Float32Array(nk));
  const dv = put(new Float32Array(nk));
  const scale = 1 / Math.sqrt(D);
  be.attention(q, k, v, out, lse, B, S, H, Hkv, D, scale);
  be.attentionBackward(q, k, v, out, lse, dout, dq, dk, dv, B, S, H, Hkv, D, scale);
  const res: Float32Array[] = [];
  for (const [view, n] of [[out, nq], [lse, B * H * S], [dq, nq], [dk, nk], [dv, nk]] as const) res.push(Float32Array.from((await be.read(view, n)) as Float32Array));
  for (const b of bufs) be.free(b.buf);
  return res;
}

function normwise(got: Float32Array, want: Float32Array, tol: number): string {
  let m = 0;
  for (const w of want) m = Math.max(m, Math.abs(w));
  for (let i = 0; i < want.length; i++) if (!(Math.abs(got[i]! - want[i]!) <= tol * (m + 1e-6))) return `[${i}] got ${got[i]} want ${want[i]} (max |want| ${m})`;
  return "ok";
}

describe("tiled attention", () => {
  test("block choice fits the workgroup memory and prefers larger blocks", () => {
    for (const d of [1, 16, 64, 96, 128, 256]) {
      for (const lim of [16384, 32768, 49152]) {
        const c = chooseAttentionBlock(d, lim);
        if (c.fwd) expect(attentionTileBytes(c.fwd, d).fwd).toBeLessThanOrEqual(lim);
        if (c.bwd) expect(Math.max(attentionTileBytes(c.bwd, d).dq, attentionTileBytes(c.bwd, d).dkv)).toBeLessThanOrEqual(lim);
        if (c.fwd < 32 && c.fwd > 0) expect(attentionTileBytes(c.fwd * 2, d).fwd).toBeGreaterThan(lim);
      }
    }
    expect(chooseAttentionBlock(64, 32768)).toEqual({ fwd: 32, bwd: 16 });
    expect(chooseAttentionBlock(1024, 32768)).toEqual({ fwd: 0, bwd: 0 });
  });

  const shapes: [number, number, number, number, number][] = [
    [1, 70, 4, 2, 16], // three blocks of 32 (fwd) / five of 16 (bwd), GQA
    [2, 33, 2, 1, 40], // multi-query, ends one past a block
    [1, 9, 3, 3, 96], // head dim needing smaller blocks
  ];
  for (const [B, S, H, Hkv, D] of shapes) {
    test(`[B ${B}, S ${S}, H ${H}, Hkv ${Hkv}, D ${D}] tiled = per-row kernels = cpu backend`, async () => {
      const t = await run(tiled, B, S, H, Hkv, D, 7 * S + D);
      const r = await run(rows, B, S, H, Hkv, D, 7 * S + D);
      const c = await run(cpu, B, S, H, Hkv, D, 7 * S + D);
      const names = ["out", "lse", "dq", "dk", "dv"];
      for (let i = 0; i < 5; i++) {
        expect(`${names[i]} vs cpu: ${normwise(t[i]!, c[i]!, 2e-5)}`).toBe(`${names[i]} vs cpu: ok`);
        expect(`${names[i]} vs rows: ${normwise(t[i]!, r[i]!, 2e-5)}`).toBe(`${names[i]} vs rows: ok`);
      }
    }, 300_000);
  }
});

describe("flash attention", () => {
  test("block choice: the first preferred block that fits the workgroup memory", () => {
    for (const d of [1, 13, 16, 37, 64, 67, 96, 128]) {
      for (const lim of [16384, 32768, 49152, 65536]) {
        const c = chooseFlashBlocks(d, lim);
        for (const k of ["fwd", "dq", "dkv"] as const) {
          const b = c[k];
          if (b) expect(flashTileBytes(d, b)[k]).toBeLessThanOrEqual(lim);
          const at = b ? FLASH_BLOCKS[k].findIndex((x) => x.rows === b.rows && x.cols === b.cols && x.rpt === b.rpt) : FLASH_BLOCKS[k].length;
          expect(at).toBeGreaterThanOrEqual(0);
          for (const x of FLASH_BLOCKS[k].slice(0, at)) expect(flashTileBytes(d, x)[k]).toBeGreaterThan(lim);
          // prefetch kept exactly where a tile takes at most FLASH_PREFETCH_MAX_SLOTS vec4 registers
          if (b) expect(!!b.prefetch).toBe(flashPrefetchSlots(d, b) <= FLASH_PREFETCH_MAX_SLOTS);
        }
      }
    }
    // the H200's 48 KiB at head dim 64: the measured best blocks; lavapipe's 32 KiB: smaller ones
    const ph = (rows: number, cols: number, rpt: 2 | 4): FlashBlock => ({ rows, cols, rpt, prefetch: true, heavyFirst: true });
    expect(chooseFlashBlocks(64, 49152)).toEqual({ fwd: ph(64, 32, 2), dq: ph(64, 16, 4), dkv: ph(32, 32, 2) });
    // (lavapipe's forward block would prefetch 8 vec4s per tile: prefetch off)
    expect(chooseFlashBlocks(64, 32768)).toEqual({ fwd: { ...ph(32, 32, 4), prefetch: false }, dq: ph(32, 16, 4), dkv: ph(32, 16, 4) });
    expect(flashBlockName(ph(64, 16, 4))).toBe("64x16r4ph");
    // head dim 128 on 48 KiB: 16×16 r4 dQ and dK/dV blocks (32 invocations, 16 vec4s per tile) without prefetch
    expect(chooseFlashBlocks(128, 49152).dkv).toEqual({ rows: 16, cols: 16, rpt: 4, prefetch: false, heavyFirst: true });
    expect(flashPrefetchSlots(128, { rows: 16, cols: 16, rpt: 4 })).toBe(16);
    expect(flashBlockName({ rows: 32, cols: 32, rpt: 2 })).toBe("32x32r2");
    expect(chooseFlashBlocks(1024, 49152)).toEqual({ fwd: null, dq: null, dkv: null });
  });

  // [B, S, H, Hkv, D]: lengths not multiples of any block (and one token), GQA ratios 1, 2, 4 and
  // multi-query, head dims 16, 64, 96 and ones that are not multiples of 4 (13, 37)
  const shapes: [number, number, number, number, number][] = [
    [1, 1, 2, 1, 64],
    [2, 37, 4, 4, 16],
    [1, 70, 4, 2, 16],
    [1, 45, 8, 2, 64],
    [2, 33, 4, 1, 13],
    [1, 29, 2, 1, 37],
    [1, 20, 4, 2, 96], // smaller blocks (3 vec4s of head dim per invocation)
  ];
  for (const [B, S, H, Hkv, D] of shapes) {
    test(`[B ${B}, S ${S}, H ${H}, Hkv ${Hkv}, D ${D}] flash (block variants, prefetch, trusted) = cpu backend = per-row kernels, reproducible`, async () => {
      const seed = 11 * S + D;
      const f = await run(flash, B, S, H, Hkv, D, seed);
      const c = await run(cpu, B, S, H, Hkv, D, seed);
      const r = await run(rows, B, S, H, Hkv, D, seed);
      const again = await run(flash, B, S, H, Hkv, D, seed);
      const f2 = await run(flash2, B, S, H, Hkv, D, seed);
      const f2ph = await run(flash2ph, B, S, H, Hkv, D, seed);
      const t = await run(trusted, B, S, H, Hkv, D, seed);
      const names = ["out", "lse", "dq", "dk", "dv"];
      for (let i = 0; i < 5; i++) {
        expect(`${names[i]} vs cpu: ${normwise(f[i]!, c[i]!, 2e-5)}`).toBe(`${names[i]} vs cpu: ok`);
        expect(`${names[i]} vs rows: ${normwise(f[i]!, r[i]!, 2e-5)}`).toBe(`${names[i]} vs rows: ok`);
        expect(Array.from(again[i]!)).toEqual(Array.from(f[i]!));
        expect(`${names[i]} 2 rows/invocation vs cpu: ${normwise(f2[i]!, c[i]!, 2e-5)}`).toBe(`${names[i]} 2 rows/invocation vs cpu: ok`);
        // prefetch + heavy-first and trusted compilation: the same bits
        expect(Array.from(f2ph[i]!)).toEqual(Array.from(f2[i]!));
        expect(Array.from(t[i]!)).toEqual(Array.from(f[i]!));
      }
    }, 300_000);
  }
});
