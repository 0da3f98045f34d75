/** Exact host conversions between f32 (and double), f16 and bf16, round to nearest even. */
export { f32ToBits, bitsToF32 } from "./f32bits.ts";
export { f16ToNumber, f16FromNumber, f16FromF32, f16FromF32Bits } from "./f16.ts";
export { bf16ToNumber, bf16FromNumber, bf16FromF32, bf16FromF32Bits } from "./bf16.ts";
