/**
 * Elementwise reduction of several equal-length arrays in fixed order, in the precision of the
 * array type — the arithmetic of the determinism rule (communicator.ts, docs/comm.md).
 *
 * f32 note: `o[i] += s[i]` on a Float32Array computes the sum in f64 and rounds to f32 on store.
 * Because binary64 has more than 2·24+2 significand bits, that double rounding equals a correctly
 * rounded f32 add (Figueroa, "When is double rounding innocuous?", SIGNUM 1995); the same holds for
 * the division of `average`. So the results are those of IEEE f32 arithmetic.
 */

import { bf16FromF32Bits } from "@zeromoe/kernels";
import type { CommArray, CommReduceOp } from "./communicator.ts";

/** Elements processed per block: all sources are combined for one block before the next, so the
 * accumulator block stays in cache. */
const BLOCK = 8192;

interface Float16ArrayLike {
  [i: number]: number;
  readonly length: number;
}
type Float16Ctor = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => Float16ArrayLike;
const Float16: Float16Ctor | undefined = (globalThis as { Float16Array?: Float16Ctor }).Float16Array;

/** A reusable f32 scratch block for 16-bit reductions. */
const accF = new Float32Array(BLOCK);
const accU = new Uint32Array(accF.buffer);
const tmpF = new Float32Array(BLOCK);
const tmpU = new Uint32Array(tmpF.buffer);

/**
 * out[outOff + i] = srcs[0][i] ⊕ srcs[1][i] ⊕ … (left to right) for i < len, then divided by
 * `divisor` when `average`. All `srcs` must be the same array type as `out` and at least `len`
 * long; `out` may not alias any source except `srcs[0]` at the same position.
 * Uint16Array data are bf16 (`half = "bf16"`) or f16 bits, summed in f32 and rounded once.
 * Throws for `average` on integer arrays or with `op = "max"`, and for f16 when the runtime lacks
 * Float16Array.
 */
export function reduceInto(
  out: CommArray,
  outOff: number,
  srcs: readonly CommArray[],
  len: number,
  op: CommReduceOp,
  average: boolean,
  divisor: number,
  half: "bf16" | "f16",
): void {
  if (srcs.length === 0) throw new Error("reduceInto: no sources");
  if (average && op !== "sum") throw new Error(`reduce: average is only defined for op "sum", got op "${op}"`);
  if (average && (out instanceof Int32Array || out instanceof Uint32Array)) {
    throw new Error(`reduce: average is not defined for ${out.constructor.name} (integer) data`);
  }
  if (out instanceof Uint16Array) {
    reduceHalf(out, outOff, srcs as readonly Uint16Array[], len, op, average, divisor, half);
    return;
  }
  if (op === "sum" && out instanceof Float32Array) {
    sumF32(out.subarray(outOff, outOff + len), srcs as readonly Float32Array[], len);
  } else if (op === "sum" && out instanceof Float64Array) {
    sumF64(out.subarray(outOff, outOff + len), srcs as readonly Float64Array[], len);
  } else {
    reduceGeneric(out, outOff, srcs, len, op);
  }
  if (average) {
    const o = out as Float32Array; // Float32Array or Float64Array here; division rounds on store
    for (let i = outOff; i < outOff + len; i++) o[i] /= divisor;
  }
}

const fround = Math.fround;

/** o[i] = ((s0[i] + s1[i]) + s2[i]) + … in f32: two sources per pass, the inner partial sum rounded
 * with Math.fround and the outer one by the Float32Array store. */
function sumF32(o: Float32Array, srcs: readonly Float32Array[], len: number): void {
  for (let b0 = 0; b0 < len; b0 += BLOCK) {
    const b1 = Math.min(len, b0 + BLOCK);
    const a = srcs[0];
    let k = 1;
    if (srcs.length >= 2) {
      const b = srcs[1];
      for (let i = b0; i < b1; i++) o[i] = a[i] + b[i];
      k = 2;
    } else if (a !== o) {
      for (let i = b0; i < b1; i++) o[i] = a[i];
    }
    for (; k + 1 < srcs.length; k += 2) {
      const c = srcs[k];
      const d = srcs[k + 1];
      for (let i = b0; i < b1; i++) o[i] = fround(o[i] + c[i]) + d[i];
    }
    if (k < srcs.length) {
      const c = srcs[k];
      for (let i = b0; i < b1; i++) o[i] += c[i];
    }
  }
}

/** Same as {@link sumF32} in f64 (no intermediate rounding needed: JS numbers are f64). */
function sumF64(o: Float64Array, srcs: readonly Float64Array[], len: number): void {
  for (let b0 = 0; b0 < len; b0 += BLOCK) {
    const b1 = Math.min(len, b0 + BLOCK);
    const a = srcs[0];
    let k = 1;
    if (srcs.length >= 2) {
      const b = srcs[1];
      for (let i = b0; i < b1; i++) o[i] = a[i] + b[i];
      k = 2;
    } else if (a !== o) {
      for (let i = b0; i < b1; i++) o[i] = a[i];
    }
    for (; k + 1 < srcs.length; k += 2) {
      const c = srcs[k];
      const d = srcs[k + 1];
      for (let i = b0; i < b1; i++) o[i] = o[i] + c[i] + d[i];
    }
    if (k < srcs.length) {
      const c = srcs[k];
      for (let i = b0; i < b1; i++) o[i] += c[i];
    }
  }
}

/** Integer sums (wrapping on store) and max for every non-16-bit type, one source per pass. */
function reduceGeneric(out: CommArray, outOff: number, srcs: readonly CommArray[], len: number, op: CommReduceOp): void {
  for (let b0 = 0; b0 < len; b0 += BLOCK) {
    const b1 = Math.min(len, b0 + BLOCK);
    const o = out as Float32Array; // same indexing semantics for every non-16-bit array type
    const first = srcs[0] as Float32Array;
    if (first !== o || outOff !== 0) for (let i = b0; i < b1; i++) o[outOff + i] = first[i];
    for (let k = 1; k < srcs.length; k++) {
      const s = srcs[k] as Float32Array;
      if (op === "sum") {
        // Integer arrays wrap on store (ToInt32 / ToUint32 of an exact double sum).
        for (let i = b0; i < b1; i++) o[outOff + i] += s[i];
      } else {
        for (let i = b0; i < b1; i++) {
          const a = o[outOff + i];
          const v = s[i];
          o[outOff + i] = a !== a || v !== v ? NaN : v > a ? v : a;
        }
      }
    }
  }
}

function reduceHalf(
  out: Uint16Array,
  outOff: number,
  srcs: readonly Uint16Array[],
  len: number,
  op: CommReduceOp,
  average: boolean,
  divisor: number,
  half: "bf16" | "f16",
): void {
  if (half === "f16" && !Float16) throw new Error("reduce: f16 data needs Float16Array, which this runtime lacks");
  const f16 = (a: Uint16Array): Float16ArrayLike => new Float16!(a.buffer, a.byteOffset, a.length);
  const srcF16 = half === "f16" ? srcs.map(f16) : [];
  const outF16 = half === "f16" ? f16(out) : null;
  for (let b0 = 0; b0 < len; b0 += BLOCK) {
    const n = Math.min(len, b0 + BLOCK) - b0;
    for (let k = 0; k < srcs.length; k++) {
      const dst = k === 0 ? accF : tmpF;
      if (half === "bf16") {
        const s = srcs[k];
        const du = k === 0 ? accU : tmpU;
        for (let i = 0; i < n; i++) du[i] = s[b0 + i] << 16;
      } else {
        const s = srcF16[k];
        for (let i = 0; i < n; i++) dst[i] = s[b0 + i];
      }
      if (k === 0) continue;
      if (op === "sum") {
        for (let i = 0; i < n; i++) accF[i] += tmpF[i];
      } else {
        for (let i = 0; i < n; i++) {
          const a = accF[i];
          const v = tmpF[i];
          accF[i] = a !== a || v !== v ? NaN : v > a ? v : a;
        }
      }
    }
    if (average) for (let i = 0; i < n; i++) accF[i] /= divisor;
    if (outF16) {
      for (let i = 0; i < n; i++) outF16[outOff + b0 + i] = accF[i];
    } else {
      for (let i = 0; i < n; i++) out[outOff + b0 + i] = bf16FromF32Bits(accU[i]);
    }
  }
}
