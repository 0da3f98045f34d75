/**
 * Bulk f32 ↔ f16/bf16 conversions of the cpu backend (kernels/src/cpu/half-arrays.ts) and the
 * chunked optimizer loops built on them (kernels/src/cpu/optim.ts), against the per-element value
 * conversions of kernels/src/numerics (themselves tested in numerics.test.ts) and a plain
 * element-by-element AdamW/LAMB written out here. Exhaustive over all 65536 16-bit patterns for
 * decoding; random f32 bit patterns (NaN, ±inf, subnormals, rounding midpoints included) and random
 * doubles for encoding; lengths that straddle the chunk size, at non-zero offsets.
 */

import { describe, expect, test } from "bun:test";
import { CHUNK, decodeHalves, encodeHalves } from "../src/cpu/half-arrays.ts";
import { adamwF, adamwScaledF, lambUpdateF, sumSquaresF } from "../src/cpu/optim.ts";
import { castA } from "../src/cpu/transfer.ts";
import { bf16FromNumber, bf16ToNumber, f16FromNumber, f16ToNumber } from "../src/numerics/index.ts";
import { xorshift32 } from "../src/testing.ts";

const HALVES = ["bf16", "f16"] as const;
const dec = (dt: "bf16" | "f16") => (dt === "bf16" ? bf16ToNumber : f16ToNumber);
const enc = (dt: "bf16" | "f16") => (dt === "bf16" ? bf16FromNumber : f16FromNumber);

/** Same value, NaN equal to NaN. */
function sameValue(a: number, b: number): boolean {
  return Number.isNaN(a) ? Number.isNaN(b) : Object.is(a, b);
}

/** f32 storage of `n` values from random bit patterns, with specials and midpoints mixed in. */
function randomF32(n: number, seed: number): Float32Array {
  const rnd = xorshift32(seed);
  const a = new Float32Array(n);
  const u = new Uint32Array(a.buffer);
  const specials = [0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0x7f7fffff, 0xff7fffff, 0x00000001, 0x807fffff, 0x3f808000, 0x3f818000, 0x3f800fff, 0x47ffefff, 0x477ff000, 0x33000000, 0x33000001];
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (i < specials.length) u[i] = specials[i]!;
    else if (i % 3 === 0) u[i] = (Math.floor(r * 2 ** 32) & 0xffff0000) | 0x8000; // bf16 midpoint
    else if (i % 3 === 1) a[i] = (rnd() - 0.5) * 2 ** Math.floor(r * 60 - 30); // ordinary values
    else u[i] = Math.floor(r * 2 ** 32); // any bits
  }
  return a;
}

describe("half-arrays", () => {
  for (const dt of HALVES) {
    test(`${dt}: decode of all 65536 patterns into Float32Array and Float64Array at an offset`, () => {
      const src = new Uint16Array(65536 + 3);
      for (let h = 0; h < 65536; h++) src[h + 3] = h;
      const d32 = new Float32Array(65536 + 5);
      const d64 = new Float64Array(65536 + 5);
      decodeHalves(src, 3, dt, d32, 5, 65536);
      decodeHalves(src, 3, dt, d64, 5, 65536);
      let bad = 0;
      for (let h = 0; h < 65536; h++) if (!sameValue(d32[h + 5]!, dec(dt)(h)) || !sameValue(d64[h + 5]!, dec(dt)(h))) bad++;
      expect(bad).toBe(0);
      expect(d32[4]).toBe(0); // nothing written before the offset
    });

    test(`${dt}: encode from Float32Array equals the value conversion of every element`, () => {
      const n = 3 * CHUNK + 17;
      const src = randomF32(n + 2, 11);
      const dst = new Uint16Array(n + 1);
      encodeHalves(src, 2, dst, 1, dt, n);
      let bad = 0;
      for (let i = 0; i < n; i++) if (dst[i + 1] !== enc(dt)(src[i + 2]!)) bad++;
      expect(bad).toBe(0);
    });

    test(`${dt}: encode from Float64Array rounds the exact double once`, () => {
      const rnd = xorshift32(5);
      const n = 1009;
      const src = new Float64Array(n);
      for (let i = 0; i < n; i++) src[i] = (rnd() - 0.5) * 2 ** Math.floor(rnd() * 40 - 20);
      src[0] = NaN;
      src[1] = -Infinity;
      // Doubles just above a bf16 midpoint whose f32 rounding lands on the midpoint: double rounding
      // through f32 would round to even instead of up.
      src[2] = 1 + 2 ** -8 + 2 ** -40;
      const dst = new Uint16Array(n);
      encodeHalves(src, 0, dst, 0, dt, n);
      for (let i = 0; i < n; i++) expect(dst[i]).toBe(enc(dt)(src[i]!));
      if (dt === "bf16") expect(dst[2]).toBe(0x3f81);
    });

    test(`${dt}: castA both directions and f16 ↔ bf16`, () => {
      const n = CHUNK + 5;
      const src = randomF32(n, 3);
      const h = new Uint16Array(n);
      castA(src, 0, "f32", h, 0, dt, n);
      const back = new Float32Array(n);
      castA(h, 0, dt, back, 0, "f32", n);
      for (let i = 0; i < n; i += 1) {
        expect(h[i]).toBe(enc(dt)(src[i]!));
        expect(sameValue(back[i]!, dec(dt)(h[i]!))).toBe(true);
      }
      const other = dt === "bf16" ? "f16" : "bf16";
      const o = new Uint16Array(n);
      castA(h, 0, dt, o, 0, other, n);
      for (let i = 0; i < n; i++) expect(o[i]).toBe(enc(other)(dec(dt)(h[i]!)));
    });

    test(`${dt}: chunked adamwF / adamwScaledF / lambUpdateF / sumSquaresF equal plain element loops`, () => {
      const n = 2 * CHUNK + 101;
      const rnd = xorshift32(dt === "bf16" ? 21 : 22);
      const r = (k: number) => Float32Array.from({ length: k }, () => (rnd() - 0.5) * 0.2);
      const g16 = new Uint16Array(n + 3);
      const gf = r(n);
      for (let i = 0; i < n; i++) g16[i + 3] = enc(dt)(gf[i]!);
      const p0 = r(n + 1);
      const m0 = r(n);
      const v0 = Float32Array.from(r(n), (x) => Math.abs(x));
      for (const decoupled of [true, false]) {
        const hp = { lr: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, decoupled, step: 3, gradScale: 0.7 };
        // Reference: the pre-chunking loop, element by element.
        const pr = p0.slice(), mr = m0.slice(), vr = v0.slice(), hr = new Uint16Array(n);
        const bc1 = 1 - hp.beta1 ** hp.step, bc2 = 1 - hp.beta2 ** hp.step;
        for (let i = 0; i < n; i++) {
          let p = pr[i + 1]!;
          let gi = dec(dt)(g16[i + 3]!) * hp.gradScale;
          if (!decoupled) gi += hp.weightDecay * p;
          const mi = hp.beta1 * mr[i]! + (1 - hp.beta1) * gi;
          const vi = hp.beta2 * vr[i]! + (1 - hp.beta2) * gi * gi;
          mr[i] = mi;
          vr[i] = vi;
          if (decoupled) p -= hp.lr * hp.weightDecay * p;
          p -= (hp.lr * (mi / bc1)) / (Math.sqrt(vi / bc2) + hp.eps);
          pr[i + 1] = p;
          hr[i] = enc(dt)(pr[i + 1]!);
        }
        const p = p0.slice(), m = m0.slice(), v = v0.slice(), h = new Uint16Array(n);
        adamwF(p, 1, { a: g16, o: 3, dtype: dt }, m, 0, v, 0, { a: h, o: 0, dtype: dt }, n, hp);
        expect(Array.from(p)).toEqual(Array.from(pr));
        expect(Array.from(m)).toEqual(Array.from(mr));
        expect(Array.from(v)).toEqual(Array.from(vr));
        expect(Array.from(h)).toEqual(Array.from(hr));
        // Skipped step: params unchanged, the 16-bit copy rewritten from them.
        const hs = new Uint16Array(n);
        adamwScaledF(p, 1, { a: g16, o: 3, dtype: dt }, m, 0, v, 0, { a: hs, o: 0, dtype: dt }, n, hp, 1, 1);
        expect(Array.from(hs)).toEqual(Array.from(hr));
      }
      let ss = 0;
      for (let i = 0; i < n; i++) ss += dec(dt)(g16[i + 3]!) ** 2;
      expect(sumSquaresF({ a: g16, o: 3, dtype: dt }, n)).toBe(ss);
      const lp = { beta1: 0.9, beta2: 0.99, eps: 1e-6, epsInsideSqrt: false, weightDecay: 0.01, gradScale: 1.3 };
      const mr = m0.slice(), vr = v0.slice(), ur = new Float32Array(n);
      for (let i = 0; i < n; i++) {
        const gi = dec(dt)(g16[i + 3]!) * lp.gradScale;
        const mi = lp.beta1 * mr[i]! + (1 - lp.beta1) * gi;
        const vi = lp.beta2 * vr[i]! + (1 - lp.beta2) * gi * gi;
        mr[i] = mi;
        vr[i] = vi;
        ur[i] = mi / (Math.sqrt(vi) + lp.eps) + lp.weightDecay * p0[i + 1]!;
      }
      const m = m0.slice(), v = v0.slice(), u = new Float32Array(n);
      lambUpdateF(p0, 1, { a: g16, o: 3, dtype: dt }, m, 0, v, 0, u, 0, n, lp);
      expect(Array.from(u)).toEqual(Array.from(ur));
      expect(Array.from(m)).toEqual(Array.from(mr));
    });
  }
});
