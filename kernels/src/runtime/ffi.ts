/**
 * The foreign-function interface the native bindings use (kernels/src/ffi: wgpu-native;
 * core/src/comm/mpi: Open MPI): the `bun:ffi` names `dlopen`, `cc`, `ptr`, `toArrayBuffer`,
 * `CString`, `FFIType` and the `Pointer` type, from this file only.
 *
 * On Bun they are bun:ffi's. On Deno this file loads too (so every module that imports a binding
 * loads, and the webgpu backend runs on Deno's own navigator.gpu, kernels/src/select.ts), and
 * `FFIType` holds the type names, but calling `dlopen`, `cc`, `ptr`, `toArrayBuffer` or `CString`
 * throws {@link FfiUnavailableError}: the two bindings compile a C shim with bun:ffi's TinyCC
 * (kernels/src/ffi/native.ts) and pass pointers as numbers, which Deno.dlopen does not do, so they
 * are Bun-only for now (README "Bun or Deno").
 */
import type * as BunFfi from "bun:ffi";
import { RUNTIME } from "./detect.ts";

/** A native pointer (bun:ffi: a number). */
export type Pointer = BunFfi.Pointer;

/** Calling a native binding on a runtime that has none. */
export class FfiUnavailableError extends Error {
  constructor(what: string) {
    super(
      `${what}: the native bindings (wgpu-native through kernels/src/ffi, Open MPI through core/src/comm/mpi) need Bun's FFI (bun:ffi) and this is ${RUNTIME}; ` +
        "on Deno use --backend cpu or webgpu (Deno's navigator.gpu) and the local transport, or run under Bun",
    );
    this.name = "FfiUnavailableError";
  }
}

const bun: typeof BunFfi | null = RUNTIME === "bun" ? (import.meta.require("bun:ffi") as typeof BunFfi) : null;

function unavailable<F>(name: string): F {
  return ((): never => {
    throw new FfiUnavailableError(`bun:ffi ${name}`);
  }) as F;
}

/** bun:ffi's type tags (on Deno: each name maps to itself, enough to build symbol tables). */
export const FFIType: typeof BunFfi.FFIType = bun?.FFIType ?? (new Proxy({}, { get: (_t, k) => String(k) }) as typeof BunFfi.FFIType);
/** bun:ffi dlopen. */
export const dlopen: typeof BunFfi.dlopen = bun?.dlopen ?? unavailable("dlopen");
/** bun:ffi cc (TinyCC). */
export const cc: typeof BunFfi.cc = bun?.cc ?? unavailable("cc");
/** bun:ffi ptr. */
export const ptr: typeof BunFfi.ptr = bun?.ptr ?? unavailable("ptr");
/** bun:ffi toArrayBuffer. */
export const toArrayBuffer: typeof BunFfi.toArrayBuffer = bun?.toArrayBuffer ?? unavailable("toArrayBuffer");
/** bun:ffi CString (a class: `new CString(ptr)`). */
export const CString: typeof BunFfi.CString = bun?.CString ?? (unavailable("CString") as typeof BunFfi.CString);

/** True when the native bindings can load on this runtime (Bun). */
export const FFI_AVAILABLE: boolean = bun !== null;
