/**
 * IEEE-754 binary16 ("f16", "half") host conversions, round to nearest, ties to even.
 *
 * Format: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits. Largest finite 65504; smallest
 * normal 2^-14; smallest subnormal 2^-24. Values at or above 65520 (65504 plus half an ulp) round
 * to infinity (IEEE-754-2019 §4.3.1, §7.4). NaN becomes a quiet NaN (see each function for the bits).
 *
 * Two independent formulations are given: {@link f16FromF32Bits} works on the f32 bit pattern (the
 * classic shift-and-round used by hardware converters), {@link f16FromNumber} works on the value
 * (exact scaling by powers of two); the tests check they agree and match `Math.f16round`.
 */

import { f32ToBits } from "./f32bits.ts";
import { narrowFromNumber } from "./narrow.ts";

/** f16 bits → value, all 65536 patterns precomputed (NaN payloads are not preserved). */
const F16_TABLE: Float32Array = (() => {
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) t[h] = decodeF16(h);
  return t;
})();

function decodeF16(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m === 0 ? sign * Infinity : NaN;
  return sign * (1024 + m) * 2 ** (e - 25);
}

/** Value of the f16 bit pattern `h` (low 16 bits used). Exact: every f16 is an f32. */
export function f16ToNumber(h: number): number {
  return F16_TABLE[h & 0xffff]!;
}

/** f16 bits (0..65535) nearest to the double `x` (ties to even), rounding the exact double value
 * once (no intermediate f32 rounding). Overflow (|x| ≥ 65520) gives ±inf; NaN gives 0x7e00 (a JS
 * NaN carries no reliable sign or payload). */
export function f16FromNumber(x: number): number {
  return narrowFromNumber(x, 10, 15, 0x7e00);
}

/** f16 bits nearest to the f32 whose bits are `bits` (u32), ties to even, by integer operations on
 * the bit pattern. NaN keeps its sign and top 10 payload bits with the quiet bit set. */
export function f16FromF32Bits(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const e32 = (bits >>> 23) & 0xff;
  const m32 = bits & 0x7fffff;
  if (e32 === 0xff) return m32 === 0 ? sign | 0x7c00 : sign | 0x7e00 | (m32 >>> 13);
  const e = e32 - 127; // unbiased
  if (e > 15) return sign | 0x7c00;
  if (e >= -14) {
    // Normal f16 candidate: keep 10 mantissa bits, round on the 13 dropped bits.
    let h = ((e + 15) << 10) | (m32 >>> 13);
    const rest = m32 & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && (h & 1) === 1)) h++; // carry may reach inf: correct
    return sign | h;
  }
  if (e < -25) return sign; // below half the smallest subnormal (2^-25): rounds to zero
  // Subnormal f16: value = (m32 | 2^23) × 2^(e−23), i.e. (m32 | 2^23) × 2^(e+1) units of 2^-24:
  // shift right by −(e+1) bits (14..24) and round on the bits shifted out.
  const full = m32 | 0x800000;
  const shift = -e - 1; // 14..24
  let h = full >>> shift;
  const rest = full & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rest > half || (rest === half && (h & 1) === 1)) h++;
  return sign | h;
}

/** f16 bits nearest to `x` after first rounding `x` to f32 (what an f32 → f16 cast does). */
export function f16FromF32(x: number): number {
  return f16FromF32Bits(f32ToBits(x));
}
