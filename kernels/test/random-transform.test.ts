/**
 * The integer Philox transforms (kernels/src/numerics/philox-transform.ts) and the host stream fill
 * (random-fill.ts) against independent float64 references: the fixed-point constants against
 * Math's, every normal sample within 1 ulp of the f64 Box–Muller formula rounded to f32 (and the share
 * that differs at all, below 1 %), edge words (u1 = 1, the smallest and largest logs, octant
 * boundaries), the moments, stream slices equal to the whole stream, uniform bounds and the checks.
 */
import { describe, expect, test } from "bun:test";
import { philox4x32 } from "../src/numerics/philox.ts";
import { COS_Q31, LN2_Q59_HI, LN2_Q59_LO, LOG_Q31, SIN_Q31, normalPairBits, scaleParts, uniformParts, uniformValue } from "../src/numerics/philox-transform.ts";
import { checkRandomFillSpec, philoxFill } from "../src/numerics/random-fill.ts";
import { xorshift32 } from "../src/testing.ts";

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const bitsOf = (v: number) => ((f32[0] = v), u32[0]!);
const valueOf = (b: number) => ((u32[0] = b), f32[0]!);

/** f64 Box–Muller of (x0, x1): [cos half, sin half] times std. */
function refPair(x0: number, x1: number, std: number): [number, number] {
  const r = Math.sqrt(-2 * Math.log((x0 + 1) / 4294967296));
  const th = 2 * Math.PI * ((x1 + 1) / 4294967296);
  return [std * (r * Math.cos(th)), std * (r * Math.sin(th))];
}

/** Distance in f32 ulps between our bits and the f64 value rounded to f32 (same sign assumed). */
function ulps(ours: number, ref: number): number {
  return Math.abs((ours | 0) - (bitsOf(ref) | 0));
}

describe("philox transforms", () => {
  test("fixed-point constants equal their float64 values to within one unit", () => {
    const c = Math.PI / 4;
    let fact = 1;
    for (let k = 0; k < COS_Q31.length; k++) {
      if (k > 0) fact *= (2 * k - 1) * (2 * k);
      expect(Math.abs(COS_Q31[k]! - (c ** (2 * k) / fact) * 2 ** 31)).toBeLessThanOrEqual(0.5 + 1e-6);
    }
    fact = 1;
    for (let k = 0; k < SIN_Q31.length; k++) {
      if (k > 0) fact *= 2 * k * (2 * k + 1);
      expect(Math.abs(SIN_Q31[k]! - (c ** (2 * k + 1) / fact) * 2 ** 31)).toBeLessThanOrEqual(0.5 + 1e-6);
    }
    for (let k = 0; k < LOG_Q31.length; k++) expect(Math.abs(LOG_Q31[k]! - 2 ** 31 / (k + 1))).toBeLessThanOrEqual(0.5);
    expect(Math.abs((LN2_Q59_HI * 2 ** 32 + LN2_Q59_LO) / 2 ** 59 - Math.LN2)).toBeLessThan(2 ** -52);
  });

  test("normal pairs: within 1 ulp of the f64 formula, below 1 % differing at all (1,000,000 random word pairs)", () => {
    const rnd = xorshift32(20261203);
    const out = new Uint32Array(2);
    let differ = 0;
    const n = 500_000;
    for (const std of [1, 0.02]) {
      const { m, e } = scaleParts(std);
      for (let i = 0; i < n; i++) {
        const x0 = rnd() >>> 0;
        const x1 = rnd() >>> 0;
        normalPairBits(x0, x1, m, e, out, 0);
        const [zc, zs] = refPair(x0, x1, std);
        for (const [o, z] of [[out[0]!, zc], [out[1]!, zs]] as const) {
          const d = ulps(o, z);
          if (d > 1) throw new Error(`x0 ${x0}, x1 ${x1}: ${valueOf(o)} vs ${z} (${d} ulp)`);
          if (d === 1) differ++;
        }
      }
    }
    expect(differ / (4 * n)).toBeLessThan(0.01);
  }, 300_000);

  test("edge words: u1 = 1 gives zeros; the smallest and largest logs; octant boundaries", () => {
    const out = new Uint32Array(2);
    const { m, e } = scaleParts(1);
    normalPairBits(0xffffffff, 12345, m, e, out, 0);
    expect([out[0], out[1]]).toEqual([0, 0]);
    const x0s = [0, 1, 2, 0x7fffffff, 0x80000000, 0xb504f333, 0xb504f334, 0xb504f332, 0xfffffffe, 0xfffffff0, 0x3504f333, 0xffff, 0x10000];
    const x1s = [0xffffffff, 0, 1, 0x1fffffff, 0x20000000, 0x1ffffffe, 0x3fffffff, 0x40000000, 0x5fffffff, 0x7fffffff, 0x9fffffff, 0xbfffffff, 0xdfffffff, 0xfffffffe, 0x12345678];
    for (const x0 of x0s) {
      for (const x1 of x1s) {
        normalPairBits(x0, x1, m, e, out, 0);
        const [zc, zs] = refPair(x0, x1, 1);
        const r = Math.sqrt(-2 * Math.log((x0 + 1) / 4294967296));
        for (const [o, z] of [[out[0]!, zc], [out[1]!, zs]] as const) {
          // where cos or sin is exactly 0 (θ a multiple of π/2) the f64 formula leaves ~1e-16·r
          if (Math.abs(z) < 1e-15 * r) expect(valueOf(o)).toBe(0);
          else expect(ulps(o, z)).toBeLessThanOrEqual(1);
        }
      }
    }
  });

  test("moments of a long stream and its slices", () => {
    const n = 400_003;
    const a = new Float32Array(n);
    philoxFill(a, { dist: "normal", key: [3, 4], start: 0, std: 2 });
    let s = 0;
    let s2 = 0;
    for (const v of a) {
      s += v;
      s2 += v * v;
    }
    expect(Math.abs(s / n)).toBeLessThan(0.02);
    expect(Math.abs(s2 / n / 4 - 1)).toBeLessThan(0.02);
    for (const [start, len] of [[0, 1], [1, 1], [1, 2], [7, 4099], [4096, 8193], [n - 3, 3]]) {
      const part = new Float32Array(len!);
      philoxFill(part, { dist: "normal", key: [3, 4], start: start!, std: 2 });
      expect(Array.from(part)).toEqual(Array.from(a.subarray(start!, start! + len!)));
    }
  }, 300_000);

  test("stream layout: normal element i is half i mod 2 of counter ⌊i/2⌋, uniform word i mod 4 of counter ⌊i/4⌋ (c2 = 1)", () => {
    const blk = new Uint32Array(4);
    const out = new Uint32Array(2);
    const { m, e } = scaleParts(0.5);
    const starts = [0, 5, 2 ** 32 * 2 + 1, 2 ** 52 + 3];
    for (const start of starts) {
      const a = new Float32Array(6);
      philoxFill(a, { dist: "normal", key: [9, 8], start, std: 0.5 });
      const u = new Float32Array(6);
      philoxFill(u, { dist: "uniform", key: [9, 8], start, lo: -1, hi: 1 });
      const { lo32, span32 } = uniformParts(-1, 1);
      for (let j = 0; j < 6; j++) {
        const i = start + j;
        const c = Math.floor(i / 2);
        philox4x32(c >>> 0, Math.floor(c / 2 ** 32), 0, 0, 9, 8, blk);
        normalPairBits(blk[0]!, blk[1]!, m, e, out, 0);
        expect(bitsOf(a[j]!)).toBe(out[i % 2]!);
        const cu = Math.floor(i / 4);
        philox4x32(cu >>> 0, Math.floor(cu / 2 ** 32), 1, 0, 9, 8, blk);
        expect(u[j]).toBe(uniformValue(blk[i % 4]!, lo32, span32));
      }
    }
  });

  test("uniform values: in [lo, hi], the f32 of lo + (hi − lo)·u", () => {
    const n = 100_001;
    for (const [lo, hi] of [[0, 1], [-0.03, 0.03], [2, 2], [-5, 7.5]] as const) {
      const a = new Float32Array(n);
      philoxFill(a, { dist: "uniform", key: [1, 2], start: 11, lo, hi });
      let mn = Infinity;
      let mx = -Infinity;
      let s = 0;
      for (const v of a) {
        mn = Math.min(mn, v);
        mx = Math.max(mx, v);
        s += v;
      }
      expect(mn).toBeGreaterThanOrEqual(Math.fround(lo));
      expect(mx).toBeLessThanOrEqual(Math.fround(hi));
      expect(Math.abs(s / n - (lo + hi) / 2)).toBeLessThanOrEqual(0.01 * (hi - lo) + 1e-7);
    }
    // exactness: u·span is one f32 product, lo + it one f32 sum
    expect(uniformValue(0xffffffff, 0, 1)).toBe(1 - 2 ** -24);
    expect(uniformValue(0, -3, 6)).toBe(-3);
    expect(uniformValue(0x80000000, -3, 6)).toBe(0);
  });

  test("bad specs are refused, naming the field", () => {
    const ok = { key: [1, 2] as [number, number], start: 0 };
    expect(() => checkRandomFillSpec({ ...ok, dist: "normal", std: -1 }, 4)).toThrow(/std/);
    expect(() => checkRandomFillSpec({ ...ok, dist: "normal", std: Number.NaN }, 4)).toThrow(/std/);
    expect(() => checkRandomFillSpec({ ...ok, dist: "normal", std: 1e-40 }, 4)).toThrow(/std/);
    expect(() => checkRandomFillSpec({ key: [1, 2 ** 32], start: 0, dist: "normal", std: 1 }, 4)).toThrow(/spec.key/);
    expect(() => checkRandomFillSpec({ ...ok, start: -1, dist: "normal", std: 1 }, 4)).toThrow(/spec.start/);
    expect(() => checkRandomFillSpec({ ...ok, start: 2 ** 53 - 2, dist: "normal", std: 1 }, 4)).toThrow(/spec.start/);
    expect(() => checkRandomFillSpec({ ...ok, dist: "uniform", lo: 1, hi: 0 }, 4)).toThrow(/lo and hi/);
    expect(() => checkRandomFillSpec({ ...ok, dist: "uniform", lo: 1e-35, hi: 1 }, 4)).toThrow(/2\^-100/);
    expect(() => checkRandomFillSpec({ ...ok, dist: "gamma" } as never, 4)).toThrow(/spec.dist/);
    expect(scaleParts(0)).toEqual({ m: 0, e: 0 });
    const { m, e } = scaleParts(0.02);
    expect(m).toBeGreaterThanOrEqual(2 ** 31);
    expect(m).toBeLessThan(2 ** 32);
    expect(Math.abs(m * 2 ** (e - 32) - 0.02)).toBeLessThan(0.02 * 2 ** -32);
  });
});
