/**
 * bfloat16 host conversions, round to nearest, ties to even.
 *
 * bf16 is the top 16 bits of an IEEE-754 binary32: 1 sign, 8 exponent (bias 127), 7 mantissa bits
 * (docs/domain.md §5; Google "BFloat16: the secret to high performance on Cloud TPUs"). Same exponent
 * range as f32, so only values within half an ulp of f32's max overflow. NaN becomes a quiet NaN
 * (see each function for the bits).
 *
 * {@link bf16FromF32Bits} is the integer bit trick (add 0x7fff + lsb, shift); {@link bf16FromNumber}
 * rounds the exact double value by scaling; tests check they agree on f32 inputs.
 */

import { bitsToF32, f32ToBits } from "./f32bits.ts";
import { narrowFromNumber } from "./narrow.ts";

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

/** bf16 bits nearest to the double `x` (ties to even), rounding the exact double once. Overflow
 * (|x| ≥ (2 − 2^-8)·2^127) gives ±inf; NaN gives 0x7fc0 (a JS NaN carries no
 * reliable sign or payload). */
export function bf16FromNumber(x: number): number {
  return narrowFromNumber(x, 7, 127, 0x7fc0);
}
