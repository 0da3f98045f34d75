/**
 * fill, copy and cast on the cpu backend (storage-level ops that know about 16-bit formats).
 */

import type { DType, HostArray } from "../backend.ts";
import { bf16FromNumber, bf16ToNumber } from "../numerics/bf16.ts";
import { f16FromNumber, f16ToNumber } from "../numerics/f16.ts";
import { decodeHalves, encodeHalves } from "./half-arrays.ts";
import type { FArr } from "./store.ts";

/** Set n elements from `o` to `value`: floats stored as-is (f32 storage rounds), f16/bf16 rounded
 * to nearest even, i32/u32 must be integers in range (throws otherwise). */
export function fillA(a: HostArray, o: number, dtype: DType, value: number, n: number): void {
  let stored = value;
  if (dtype === "f16") stored = f16FromNumber(value);
  else if (dtype === "bf16") stored = bf16FromNumber(value);
  else if (dtype === "i32" && (!Number.isInteger(value) || value < -(2 ** 31) || value >= 2 ** 31)) throw new Error(`cpu fill: value ${value} is not an i32`);
  else if (dtype === "u32" && (!Number.isInteger(value) || value < 0 || value >= 2 ** 32)) throw new Error(`cpu fill: value ${value} is not a u32`);
  a.fill(stored, o, o + n);
}

/** Convert n elements between f32/f16/bf16 (f32 storage may be Float64Array). f16 ↔ bf16 goes
 * through the exact value. Same dtype copies. The f32 ↔ 16-bit directions are bulk loops on the bits
 * (./half-arrays.ts), bit-identical to the per-element value conversions. */
export function castA(src: HostArray, so: number, sdt: DType, dst: HostArray, dof: number, ddt: DType, n: number): void {
  if (sdt === ddt) {
    dst.set(src.subarray(so, so + n) as never, dof);
    return;
  }
  const srcHalf = sdt === "f16" || sdt === "bf16";
  const dstHalf = ddt === "f16" || ddt === "bf16";
  if (srcHalf && !dstHalf) return decodeHalves(src as Uint16Array, so, sdt, dst as FArr, dof, n);
  if (!srcHalf && dstHalf) return encodeHalves(src as FArr, so, dst as Uint16Array, dof, ddt, n);
  // f16 ↔ bf16: decode exactly, round once.
  const dec = sdt === "f16" ? f16ToNumber : bf16ToNumber;
  const enc = ddt === "f16" ? f16FromNumber : bf16FromNumber;
  for (let i = 0; i < n; i++) dst[dof + i] = enc(dec(src[so + i]!));
}
