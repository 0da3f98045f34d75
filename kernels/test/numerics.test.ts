/**
 * f16/bf16 host conversions (kernels/src/numerics) against independent formulations:
 * - f16 decode vs DataView.getFloat16; f16 encode vs DataView.setFloat16 (both ES2025 built-ins;
 *   the references of kernels/test/reference/cast.ts, as is the bf16 decode);
 * - bf16 decode vs the IEEE formula (−1)^s · 2^(e−127) · (1 + m/128); bf16 encode vs choosing the
 *   nearer of the two bracketing bf16 values in float64 (ties to even mantissa);
 * - the bit-trick and value-scaling encoders against each other.
 * Exhaustive over all 65536 16-bit patterns, over every f32 at and next to every rounding midpoint,
 * and on random f32 bit patterns and random doubles.
 */

import { describe, expect, test } from "bun:test";
import { bf16FromF32, bf16FromF32Bits, bf16FromNumber, bf16ToNumber, bitsToF32, f16FromF32, f16FromF32Bits, f16FromNumber, f16ToNumber, f32ToBits } from "../src/numerics/index.ts";
import { xorshift32 } from "../src/testing.ts";
import { refBf16Value as refBf16Decode, refF16Bits as refF16Encode, refF16Value as refF16Decode } from "./reference/cast.ts";

/** Nearest bf16 of an f32 value by comparing distances to the truncated value and the next one. */
function refBf16Encode(x: number): number {
  if (Number.isNaN(x)) return 0x7fc0;
  const bits = f32ToBits(x);
  const lo = bits >>> 16; // truncation toward zero
  const vlo = refBf16Decode(lo);
  const hiBits = lo + 1; // next magnitude (may be inf)
  const vhi = (hiBits & 0x7fff) === 0x7f80 ? Math.sign(x) * 2 ** 128 : refBf16Decode(hiBits);
  const dlo = Math.abs(x - vlo);
  const dhi = Math.abs(vhi - x);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hiBits & 0xffff;
  return (lo & 1) === 0 ? lo : hiBits & 0xffff;
}

function isNaNF16(h: number): boolean {
  return (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
}
function isNaNBf16(h: number): boolean {
  return (h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0;
}

describe("f16", () => {
  test("all 65536 patterns decode as DataView.getFloat16 and re-encode to themselves", () => {
    let bad = 0;
    for (let h = 0; h < 65536; h++) {
      const v = f16ToNumber(h);
      const r = refF16Decode(h);
      if (isNaNF16(h)) {
        if (!Number.isNaN(v) || !isNaNF16(f16FromNumber(v)) || !isNaNF16(f16FromF32(v))) bad++;
        continue;
      }
      if (!Object.is(v, r)) bad++;
      if (f16FromNumber(v) !== h || f16FromF32(v) !== h || f16FromF32Bits(f32ToBits(v)) !== h) bad++;
    }
    expect(bad).toBe(0);
  });

  test("every f32 at, just below and just above each rounding midpoint (ties to even, overflow)", () => {
    let bad = 0;
    let checked = 0;
    for (let h = 0; h < 0x7c00; h++) {
      // midpoint between h and h+1 (h = 0x7bff: between 65504 and the next step 65536 → 65520)
      const a = f16ToNumber(h);
      const b = h === 0x7bff ? 65536 : f16ToNumber(h + 1);
      const mid = (a + b) / 2;
      const mb = f32ToBits(mid);
      for (const bits of [mb - 1, mb, mb + 1]) {
        for (const sbits of [bits, (bits | 0x80000000) >>> 0]) {
          const x = bitsToF32(sbits);
          const want = refF16Encode(x);
          if (f16FromF32Bits(sbits) !== want || f16FromNumber(x) !== want) bad++;
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(180000);
    expect(bad).toBe(0);
  });

  test("random f32 bit patterns and random doubles match Math.f16round", () => {
    const next = xorshift32(12345);
    let bad = 0;
    for (let i = 0; i < 200000; i++) {
      const bits = next();
      const x = bitsToF32(bits);
      if (Number.isNaN(x)) {
        if (!isNaNF16(f16FromF32Bits(bits))) bad++;
        continue;
      }
      const want = refF16Encode(x);
      if (f16FromF32Bits(bits) !== want || f16FromNumber(x) !== want) bad++;
    }
    for (let i = 0; i < 100000; i++) {
      // doubles spanning subnormal..overflow range with full 53-bit mantissas
      const x = (next() / 2 ** 32 - 0.5) * 2 ** ((next() % 50) - 30) + (next() / 2 ** 32) * 2 ** -40;
      if (f16FromNumber(x) !== refF16Encode(x)) bad++;
    }
    expect(bad).toBe(0);
  });

  test("edge values", () => {
    expect(f16FromNumber(65504)).toBe(0x7bff);
    expect(f16FromNumber(65519.99)).toBe(0x7bff);
    expect(f16FromNumber(65520)).toBe(0x7c00);
    expect(f16FromNumber(-1e6)).toBe(0xfc00);
    expect(f16FromNumber(Infinity)).toBe(0x7c00);
    expect(f16FromNumber(-Infinity)).toBe(0xfc00);
    expect(f16FromNumber(-0)).toBe(0x8000);
    expect(f16FromNumber(2 ** -24)).toBe(1);
    expect(f16FromNumber(2 ** -25)).toBe(0); // tie to even (0)
    expect(f16FromNumber(3 * 2 ** -25)).toBe(2); // tie 1.5 → 2
    expect(f16FromF32(2 ** -25 * 1.0000001)).toBe(1);
    expect(f16FromNumber(2 ** -14 - 2 ** -26)).toBe(0x400); // rounds up into the smallest normal
    expect(isNaNF16(f16FromNumber(NaN))).toBe(true);
    expect(isNaNF16(f16FromF32Bits(0x7f800001))).toBe(true); // signalling NaN stays NaN
    expect(f16ToNumber(0x3c00)).toBe(1);
    expect(f16ToNumber(0x0001)).toBe(2 ** -24);
  });
});

describe("bf16", () => {
  test("all 65536 patterns decode by the IEEE formula and re-encode to themselves", () => {
    let bad = 0;
    for (let h = 0; h < 65536; h++) {
      const v = bf16ToNumber(h);
      if (isNaNBf16(h)) {
        if (!Number.isNaN(v) || !isNaNBf16(bf16FromNumber(v)) || !isNaNBf16(bf16FromF32(v))) bad++;
        continue;
      }
      if (!Object.is(v, refBf16Decode(h))) bad++;
      if (bf16FromNumber(v) !== h || bf16FromF32(v) !== h || bf16FromF32Bits(f32ToBits(v)) !== h) bad++;
    }
    expect(bad).toBe(0);
  });

  test("every f32 at, just below and just above each rounding midpoint", () => {
    let bad = 0;
    for (let h = 0; h < 0x7f80; h++) {
      const mb = ((h << 16) | 0x8000) >>> 0; // exact midpoint between h and h+1 in f32 bits
      for (const bits of [mb - 1, mb, mb + 1]) {
        for (const sbits of [bits >>> 0, (bits | 0x80000000) >>> 0]) {
          const x = bitsToF32(sbits);
          const want = refBf16Encode(x);
          if (bf16FromF32Bits(sbits) !== want || bf16FromNumber(x) !== want) bad++;
        }
      }
    }
    expect(bad).toBe(0);
  });

  test("random f32 bit patterns", () => {
    const next = xorshift32(777);
    let bad = 0;
    for (let i = 0; i < 200000; i++) {
      const bits = next();
      const x = bitsToF32(bits);
      if (Number.isNaN(x)) {
        if (!isNaNBf16(bf16FromF32Bits(bits))) bad++;
        continue;
      }
      const want = refBf16Encode(x);
      if (bf16FromF32Bits(bits) !== want || bf16FromNumber(x) !== want) bad++;
    }
    expect(bad).toBe(0);
  });

  test("edge values", () => {
    expect(bf16FromNumber(1)).toBe(0x3f80);
    expect(bf16FromNumber(-0)).toBe(0x8000);
    expect(bf16FromNumber(Infinity)).toBe(0x7f80);
    expect(bf16FromNumber(3.4028234663852886e38)).toBe(0x7f80); // f32 max rounds up to inf in bf16
    expect(bf16FromNumber(1 + 2 ** -8)).toBe(0x3f80); // tie → even
    expect(bf16FromNumber(1 + 3 * 2 ** -8)).toBe(0x3f82); // tie → even (up)
    expect(bf16FromNumber(2 ** -133)).toBe(1);
    expect(isNaNBf16(bf16FromNumber(NaN))).toBe(true);
    expect(isNaNBf16(bf16FromF32Bits(0x7f800001))).toBe(true);
  });
});
