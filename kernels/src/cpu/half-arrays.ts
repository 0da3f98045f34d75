/**
 * Bulk conversions between f32 storage and 16-bit float bits (f16, bf16) on the cpu backend: the
 * hot loops of `cast`, the fused AdamW/LAMB steps and `sumSquares` in bf16/fp16 training.
 *
 * Results are bit-identical to the per-element value functions of ../numerics
 * (`bf16FromNumber`/`f16FromNumber`, `bf16ToNumber`/`f16ToNumber`), which stay the reference:
 * - decoding is exact in every path (every f16/bf16 value is an f32); bf16 → Float32Array storage
 *   is a 16-bit shift of the bits into a Uint32Array view of the destination;
 * - encoding from Float32Array storage rounds the f32 bit pattern (`bf16FromF32Bits`,
 *   `f16FromF32Bits`), which equals rounding the exact value once since the value *is* that f32;
 *   NaN gives the value functions' canonical quiet NaN (bf16 0x7fc0, f16 0x7e00), not the
 *   payload-keeping bits. Float64Array storage (precision "f64") keeps the value path (one
 *   rounding of the exact double, no intermediate f32).
 */

import type { DType } from "../backend.ts";
import { bf16FromF32Bits, bf16FromNumber, bf16ToNumber } from "../numerics/bf16.ts";
import { f16FromF32Bits, f16FromNumber, f16ToNumber } from "../numerics/f16.ts";
import type { FArr } from "./store.ts";

/** A 16-bit float dtype. */
export type HalfDType = "f16" | "bf16";

/** Uint32Array over the same bytes as `a` (f32 storage), to read or write raw f32 bits. */
function bitsView(a: Float32Array): Uint32Array {
  return new Uint32Array(a.buffer, a.byteOffset, a.length);
}

/** dst[dof + i] = value of the `dtype` bits src[so + i], for i < n. Exact.
 * @param src 16-bit bits (Uint16Array); @param dst f32 storage (Float32Array or Float64Array).
 * Bounds are the caller's (backend span checks); throws on an unknown dtype. */
export function decodeHalves(src: Uint16Array, so: number, dtype: DType, dst: FArr, dof: number, n: number): void {
  if (dtype === "bf16") {
    if (dst instanceof Float32Array) {
      const d = bitsView(dst);
      for (let i = 0; i < n; i++) d[dof + i] = src[so + i]! << 16;
    } else for (let i = 0; i < n; i++) dst[dof + i] = bf16ToNumber(src[so + i]!);
    return;
  }
  if (dtype !== "f16") throw new Error(`decodeHalves: dtype must be f16 or bf16, got ${dtype}`);
  for (let i = 0; i < n; i++) dst[dof + i] = f16ToNumber(src[so + i]!);
}

/** dst[dof + i] = `dtype` bits nearest (ties to even) to src[so + i], for i < n: the same bits as
 * `bf16FromNumber`/`f16FromNumber` of the stored value (see the file comment).
 * @param src f32 storage; @param dst 16-bit bits. Throws on an unknown dtype. */
export function encodeHalves(src: FArr, so: number, dst: Uint16Array, dof: number, dtype: DType, n: number): void {
  if (dtype !== "bf16" && dtype !== "f16") throw new Error(`encodeHalves: dtype must be f16 or bf16, got ${dtype}`);
  if (!(src instanceof Float32Array)) {
    const enc = dtype === "bf16" ? bf16FromNumber : f16FromNumber;
    for (let i = 0; i < n; i++) dst[dof + i] = enc(src[so + i]!);
    return;
  }
  const s = bitsView(src);
  if (dtype === "bf16") {
    for (let i = 0; i < n; i++) {
      const bits = s[so + i]!;
      // NaN (exponent all ones, mantissa ≠ 0) → 0x7fc0 as bf16FromNumber; else round the bits
      dst[dof + i] = (bits & 0x7fffffff) > 0x7f800000 ? 0x7fc0 : bf16FromF32Bits(bits);
    }
    return;
  }
  for (let i = 0; i < n; i++) {
    const bits = s[so + i]!;
    dst[dof + i] = (bits & 0x7fffffff) > 0x7f800000 ? 0x7e00 : f16FromF32Bits(bits);
  }
}

/** Element count of the scratch chunks used by {@link decodeChunk}. */
export const CHUNK = 4096;
const scratch = new Float32Array(CHUNK);

/** Values of n ≤ {@link CHUNK} elements of a float source from element `o` (f32 storage copied,
 * f16/bf16 decoded exactly) in a module scratch array (overwritten by the next call; values are
 * exact, so f64 storage is returned as a subarray of itself instead of being narrowed). */
export function decodeChunk(a: FArr | Uint16Array, o: number, dtype: DType, n: number): FArr {
  if (a instanceof Uint16Array) {
    decodeHalves(a, o, dtype, scratch, 0, n);
    return scratch;
  }
  return a.subarray(o, o + n);
}
