/**
 * Moving device buffers through host-side collectives. The communicator works on host typed arrays
 * (core/src/comm); these helpers read a device range into the array type the communicator expects
 * for the buffer's dtype (Float32Array for f32, raw Uint16Array bits for bf16/f16) and write results
 * back. They are the only place where engine state crosses between device and host for
 * communication.
 */
import type { Backend, Buf, DType, HostArray } from "@zeromoe/kernels";
import type { CommArray } from "../comm/communicator.ts";

/** Communicator array for `n` elements of `dtype` (f32 → Float32Array, 16-bit → Uint16Array). */
export function hostArrayFor(dtype: DType, n: number): Float32Array | Uint16Array {
  if (dtype === "f32") return new Float32Array(n);
  if (dtype === "bf16" || dtype === "f16") return new Uint16Array(n);
  throw new Error(`hostArrayFor: parameters and gradients are f32, bf16 or f16, got ${dtype}`);
}

/** Normalise a backend read to a communicator array (a Float64Array from the f64 CPU backend is
 * rounded to f32). */
export function toCommArray(a: HostArray): CommArray {
  return a instanceof Float64Array ? Float32Array.from(a) : a;
}

/** Read `n` elements at `off` of `buf` into a host array of length `len ≥ n` (the tail is zero
 * padding). */
export async function readPadded(be: Backend, buf: Buf, off: number, n: number, len: number): Promise<Float32Array | Uint16Array> {
  const out = hostArrayFor(buf.dtype, len);
  if (n > 0) {
    const got = toCommArray(await be.read({ buf, off }, n));
    (out as Float32Array).set(got as Float32Array, 0);
  }
  return out;
}

/** Interpretation of 16-bit communicator data for a dtype. */
export function halfKind(dtype: DType): "bf16" | "f16" {
  return dtype === "f16" ? "f16" : "bf16";
}

/** dst[off..off+n) += src (host array of the buffer's dtype), through an f32 temporary for 16-bit
 * buffers (one rounding to the storage dtype, nearest even). */
export function accumulateHost(be: Backend, dst: Buf, off: number, src: Float32Array | Uint16Array, n: number): void {
  if (n === 0) return;
  const tmp = be.alloc(dst.dtype, n, "comm");
  be.write({ buf: tmp, off: 0 }, src.subarray(0, n));
  accumulateDevice(be, dst, off, tmp, 0, n);
  be.free(tmp);
}

/** Elements per chunk of a 16-bit {@link accumulateDevice}, read at each call (2²⁴: two 64 MiB f32
 * temporaries, not two f32 copies of a whole unit — 1.4e9 bytes for one Mixtral-8x7B expert;
 * memory traces at a scaled-down size lower it by the scale). */
export const accumulateChunk = { elements: 2 ** 24 };

/** dst[dOff..dOff+n) += src[sOff..sOff+n) for buffers of the same dtype (f32, bf16, f16); 16-bit
 * sums go through f32 (chunk by chunk, {@link accumulateChunk}) and round once. */
export function accumulateDevice(be: Backend, dst: Buf, dOff: number, src: Buf, sOff: number, n: number): void {
  if (n === 0) return;
  if (dst.dtype !== src.dtype) throw new Error(`accumulateDevice: dtype mismatch ${dst.dtype} += ${src.dtype}`);
  if (dst.dtype === "f32") {
    be.axpy(1, { buf: src, off: sOff }, { buf: dst, off: dOff }, n);
    return;
  }
  const len = Math.min(n, Math.max(1, accumulateChunk.elements));
  const a = be.alloc("f32", len, "comm", "any"); // each chunk is cast in before it is read
  const b = be.alloc("f32", len, "comm", "any");
  for (let c0 = 0; c0 < n; c0 += len) {
    const c = Math.min(len, n - c0);
    be.cast({ buf: dst, off: dOff + c0 }, { buf: a, off: 0 }, c);
    be.cast({ buf: src, off: sOff + c0 }, { buf: b, off: 0 }, c);
    be.axpy(1, { buf: b, off: 0 }, { buf: a, off: 0 }, c);
    be.cast({ buf: a, off: 0 }, { buf: dst, off: dOff + c0 }, c);
  }
  be.free(a);
  be.free(b);
}
