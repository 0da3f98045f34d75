/**
 * bfloat16 host conversions, round to nearest, ties to even.
 *
 * bf16 is the top 16 bits of an IEEE-754 binary32: 1 sign, 8 exponent (bias 127), 7 mantissa bits
 * (domain.md §5; Google "BFloat16: the secret to high performance on Cloud TPUs"). Same exponent
 * range as f32, so only values within half an ulp of f32's max overflow. NaN becomes a quiet NaN
 * (see each function for the bits).
 *
 * {@link bf16FromF32Bits} is the integer bit trick (add 0x7fff + lsb, shift); {@link bf16FromNumber}
 * rounds the exact double value by scaling; tests check they agree on f32 inputs.
 */

import { bitsToF32, f32ToBits } from "./f32bits.ts";

/** Value of the bf16 bit pattern `h` (low 16 bits used). Exact. */
export function bf16ToNumber(h: number): number {
  return bitsToF32((h & 0xffff) << 16);
}

/** bf16 bits nearest to the f32 whose bits are `bits` (u32), ties to even. NaN keeps sign and top
 * payload bits, quiet bit set. */
export function bf16FromF32Bits(bits: number): number {
  bits = bits >>> 0;
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) return ((bits >>> 16) | 0x40) & 0xffff;
  const lsb = (bits >>> 16) & 1;
  return ((bits + 0x7fff + lsb) >>> 16) & 0xffff;
}

/** bf16 bits nearest to `x` after first rounding `x` to f32 (what an f32 → bf16 cast does). */
export function bf16FromF32(x: number): number {
  return bf16FromF32Bits(f32ToBits(x));
}

function roundHalfEven(q: number): number {
  const f = Math.floor(q);
  const d = q - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** bf16 bits nearest to the double `x` (ties to even), rounding the exact double once. Overflow
 * (|x| ≥ (2 − 2^-8)·2^127) gives ±inf; NaN gives 0x7fc0 (a JS NaN carries no
 * reliable sign or payload). */
export function bf16FromNumber(x: number): number {
  if (Number.isNaN(x)) return 0x7fc0;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a === Infinity) return sign | 0x7f80;
  if (a < 2 ** -126) return sign | roundHalfEven(a * 2 ** 133); // subnormal quantum 2^-133
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  let r = roundHalfEven(a * 2 ** (7 - e)); // in [128, 256]
  if (r === 256) {
    r = 128;
    e++;
  }
  if (e > 127) return sign | 0x7f80;
  return sign | ((e + 127) << 7) | (r - 128);
}
