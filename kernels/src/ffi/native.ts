/**
 * The native layer: wgpu-native's plain functions through `dlopen`, and the by-value shim
 * (kernels/src/ffi/shim.c) compiled at run time by Bun's built-in TinyCC (`cc` from `bun:ffi`).
 *
 * Functions whose arguments are only scalars and pointers are called directly. Everything that
 * takes or receives a struct by value (WGPUStringView, *CallbackInfo, descriptors) goes through the
 * shim, whose C code builds the structs with the layout of webgpu.h itself. See docs/domain.md §6.
 */
import { CString, FFIType, cc, dlopen, type Pointer } from "../runtime/ffi.ts";
import { ensureRuntimeDir } from "./runtime-dir.ts";
import { mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { resolveLibrary, type LibraryLocation } from "./library.ts";

const P = "ptr" as const;
const U32 = "u32" as const;
const I32 = "i32" as const;
const U64 = "u64" as const;
const U64R = FFIType.u64_fast;
const V = "void" as const;

/** wgpu-native functions called directly (scalar/pointer arguments only). */
const DIRECT = {
  wgpuGetVersion: { args: [], returns: U32 },
  wgpuInstanceRelease: { args: [P], returns: V },
  wgpuInstanceProcessEvents: { args: [P], returns: V },
  wgpuAdapterRelease: { args: [P], returns: V },
  wgpuAdapterHasFeature: { args: [P, U32], returns: U32 },
  wgpuDeviceRelease: { args: [P], returns: V },
  wgpuDeviceDestroy: { args: [P], returns: V },
  wgpuDeviceGetQueue: { args: [P], returns: P },
  wgpuDevicePushErrorScope: { args: [P, U32], returns: V },
  wgpuQueueRelease: { args: [P], returns: V },
  wgpuQueueSubmitForIndex: { args: [P, U64, P], returns: U64R },
  wgpuQueueWriteBuffer: { args: [P, P, U64, P, U64], returns: V },
  wgpuQueueGetTimestampPeriod: { args: [P], returns: "f32" },
  wgpuBufferRelease: { args: [P], returns: V },
  wgpuBufferDestroy: { args: [P], returns: V },
  wgpuBufferGetMappedRange: { args: [P, U64, U64], returns: P },
  wgpuBufferGetConstMappedRange: { args: [P, U64, U64], returns: P },
  wgpuBufferUnmap: { args: [P], returns: V },
  wgpuShaderModuleRelease: { args: [P], returns: V },
  wgpuBindGroupLayoutRelease: { args: [P], returns: V },
  wgpuPipelineLayoutRelease: { args: [P], returns: V },
  wgpuBindGroupRelease: { args: [P], returns: V },
  wgpuComputePipelineRelease: { args: [P], returns: V },
  wgpuComputePipelineGetBindGroupLayout: { args: [P, U32], returns: P },
  wgpuCommandEncoderRelease: { args: [P], returns: V },
  wgpuCommandEncoderCopyBufferToBuffer: { args: [P, P, U64, P, U64, U64], returns: V },
  wgpuCommandEncoderClearBuffer: { args: [P, P, U64, U64], returns: V },
  wgpuCommandEncoderResolveQuerySet: { args: [P, P, U32, U32, P, U64], returns: V },
  wgpuCommandEncoderWriteTimestamp: { args: [P, P, U32], returns: V },
  wgpuCommandBufferRelease: { args: [P], returns: V },
  wgpuComputePassEncoderRelease: { args: [P], returns: V },
  wgpuComputePassEncoderSetPipeline: { args: [P, P], returns: V },
  wgpuComputePassEncoderSetBindGroup: { args: [P, U32, P, U64, P], returns: V },
  wgpuComputePassEncoderDispatchWorkgroups: { args: [P, U32, U32, U32], returns: V },
  wgpuComputePassEncoderDispatchWorkgroupsIndirect: { args: [P, P, U64], returns: V },
  wgpuComputePassEncoderEnd: { args: [P], returns: V },
  wgpuComputePassEncoderSetImmediates: { args: [P, U32, P, U64], returns: V },
  wgpuComputePassEncoderPopDebugGroup: { args: [P], returns: V },
  wgpuCommandEncoderPopDebugGroup: { args: [P], returns: V },
  wgpuQuerySetRelease: { args: [P], returns: V },
  wgpuQuerySetDestroy: { args: [P], returns: V },
} as const;

/** Functions defined in shim.c. */
const SHIM = {
  zm_slot_new: { args: [], returns: P },
  zm_slot_reset: { args: [P], returns: V },
  zm_slot_free: { args: [P], returns: V },
  zm_slot_done: { args: [P], returns: I32 },
  zm_slot_status: { args: [P], returns: I32 },
  zm_slot_type: { args: [P], returns: I32 },
  zm_slot_reason: { args: [P], returns: I32 },
  zm_slot_handle: { args: [P], returns: P },
  zm_slot_message: { args: [P], returns: P },
  zm_slot_message_len: { args: [P], returns: U64R },
  zm_slot_blob: { args: [P], returns: P },
  zm_slot_blob_len: { args: [P], returns: U64R },
  zm_errq_new: { args: [], returns: P },
  zm_errq_count: { args: [P], returns: I32 },
  zm_errq_pop: { args: [P], returns: P },
  zm_errq_free: { args: [P], returns: V },
  zm_abi_selftest: { args: [P, U64], returns: U64R },
  zm_abi_callback_selftest: { args: [P, I32, P, U64], returns: V },
  zm_create_instance: { args: [], returns: P },
  zm_request_adapter: { args: [P, U32, U32, U32, P], returns: U64R },
  zm_enumerate_adapters: { args: [P, P], returns: U64R },
  zm_adapter_info: { args: [P, P, P, P, U64], returns: I32 },
  zm_limit_count: { args: [], returns: I32 },
  zm_limit_name: { args: [I32], returns: "cstring" },
  zm_limit_bits: { args: [I32], returns: I32 },
  zm_get_limits: { args: [P, P, P], returns: I32 },
  zm_get_features: { args: [P, P, P, U64], returns: U64R },
  zm_request_device: { args: [P, P, U64, P, P, U64, P, P, P], returns: U64R },
  zm_pop_error_scope: { args: [P, P], returns: U64R },
  zm_create_buffer: { args: [P, P, U64, U64, U64, U32], returns: P },
  zm_buffer_map_async: { args: [P, U64, U64, U64, P], returns: U64R },
  zm_create_shader_module_wgsl: { args: [P, P, U64, P, U64], returns: P },
  zm_create_shader_module_wgsl_trusted: { args: [P, P, U64, P, U64, U32], returns: P },
  zm_create_bind_group_layout: { args: [P, P, U64, P, U64], returns: P },
  zm_create_pipeline_layout: { args: [P, P, U64, U32, P, U64], returns: P },
  zm_create_compute_pipeline: { args: [P, P, P, P, U64, P, P, P, U64, P, U64], returns: P },
  zm_create_bind_group: { args: [P, P, P, U64, P, U64], returns: P },
  zm_create_command_encoder: { args: [P, P, U64], returns: P },
  zm_begin_compute_pass: { args: [P, P, U64, P, U32, U32], returns: P },
  zm_encoder_finish: { args: [P, P, U64], returns: P },
  zm_queue_on_submitted_work_done: { args: [P, P], returns: U64R },
  zm_create_query_set: { args: [P, U32, U32, P, U64], returns: P },
  zm_device_poll: { args: [P, I32, U64], returns: I32 },
  zm_debug_label: { args: [P, I32, I32, P, U64], returns: V },
} as const;

/** bun-types types a "ptr" return as `Pointer | bigint | null` and "u64_fast" as `number | bigint`;
 * on x86-64 Linux Bun hands out numbers for both (user-space addresses and our sizes fit in 53
 * bits), so the symbol tables are typed with those narrower results. */
type Narrow<T> = {
  [K in keyof T]: T[K] extends (...a: infer A) => infer R
    ? (...a: A) => null extends R ? (bigint extends R ? Pointer | null : R) : bigint extends R ? number : R
    : never;
};
type DirectLib = Narrow<ReturnType<typeof dlopen<typeof DIRECT>>["symbols"]>;
type ShimLib = Narrow<ReturnType<typeof cc<typeof SHIM>>["symbols"]>;

/** Extensions only our own library (native/wgpu-coop) exports; absent from wgpu-native. */
const COOP_EXT = {
  zmAdapterCooperativeMatrixProperties: { args: [P, P, U64], returns: U64R },
} as const;
type CoopExtLib = Narrow<ReturnType<typeof dlopen<typeof COOP_EXT>>["symbols"]>;

/** Our library's WGSL validator (native/wgpu-coop/src/validate.rs), looked up on its own: builds
 * from before it was added still load as our library without it. */
const VALIDATE_EXT = {
  zm_naga_validate_wgsl: { args: [P, U64, P, U64], returns: U64R },
} as const;
type ValidateExtLib = Narrow<ReturnType<typeof dlopen<typeof VALIDATE_EXT>>["symbols"]>;

/** The loaded native layer: `lib` = direct wgpu-native functions, `shim` = shim.c functions,
 * `coop` = our library's extensions (null when the library is the prebuilt wgpu-native),
 * `validate` = its WGSL validator (null for the prebuilt library and for older builds of ours). */
export interface Native {
  readonly location: LibraryLocation;
  readonly lib: DirectLib;
  readonly shim: ShimLib;
  readonly coop: CoopExtLib | null;
  readonly validate: ValidateExtLib | null;
}

/** Which library a {@link Native} is: our native/wgpu-coop build ("zm-wgpu") or the prebuilt
 * "wgpu-native" (told apart by the extension symbol, not by the file name). */
export function libraryKind(native: Native): "zm-wgpu" | "wgpu-native" {
  return native.coop ? "zm-wgpu" : "wgpu-native";
}

/**
 * Compile shim.c with Bun's TinyCC against the headers in `headerDir`, linked to `libraryPath`.
 * This is the one place the by-value ABI trick lives; its own test is kernels/test/ffi/shim.test.ts.
 * TinyCC links by `-L dir -l name`, so a library whose file name is not `lib<name>.so` is reached
 * through a symlink in a temporary folder.
 * @throws Error naming the library and headers when compilation or linking fails.
 */
export function compileShim(libraryPath: string, headerDir: string): ShimLib {
  let dir = dirname(libraryPath);
  let name = basename(libraryPath);
  const m = /^lib(.+)\.so$/.exec(name);
  if (m) name = m[1];
  else {
    dir = mkdtempSync(join(tmpdir(), "zeromoe-wgpu-"));
    symlinkSync(libraryPath, join(dir, "libwgpu_native.so"));
    name = "wgpu_native";
  }
  try {
    const { symbols } = cc({
      source: join(import.meta.dirname, "shim.c"),
      include: [headerDir],
      library: [name],
      flags: [`-L${dir}`],
      symbols: SHIM,
    });
    return symbols as unknown as ShimLib;
  } catch (e) {
    throw new Error(
      `compiling the wgpu-native shim (kernels/src/ffi/shim.c) with bun:ffi cc failed against library ${libraryPath} ` +
        `and headers in ${headerDir}: ${(e as Error).message}`,
    );
  }
}

const cache = new Map<string, Native>();

/**
 * Load wgpu-native (see {@link resolveLibrary} for the search order) and compile the shim; cached
 * per library path, so every GPU object of a process shares one native layer.
 * @throws WgpuLibraryNotFoundError when the library or headers are missing.
 */
export function loadNative(libraryPath?: string): Native {
  const location = resolveLibrary(libraryPath);
  const hit = cache.get(location.libraryPath);
  if (hit) return hit;
  ensureRuntimeDir();
  let lib: DirectLib;
  try {
    lib = dlopen(location.libraryPath, DIRECT).symbols as unknown as DirectLib;
  } catch (e) {
    throw new Error(`dlopen of wgpu-native at ${location.libraryPath} failed: ${(e as Error).message}`);
  }
  const shim = compileShim(location.libraryPath, location.headerDir);
  let coop: CoopExtLib | null = null;
  try {
    coop = dlopen(location.libraryPath, COOP_EXT).symbols as unknown as CoopExtLib;
  } catch {
    coop = null; // the prebuilt wgpu-native: no extensions
  }
  let validate: ValidateExtLib | null = null;
  try {
    validate = dlopen(location.libraryPath, VALIDATE_EXT).symbols as unknown as ValidateExtLib;
  } catch {
    validate = null;
  }
  const native: Native = { location, lib, shim, coop, validate };
  cache.set(location.libraryPath, native);
  return native;
}

const encoder = new TextEncoder();

/** UTF-8 bytes of `s` plus its byte length, for (const char*, size_t) arguments. The returned
 * `bytes` must stay referenced until the native call returns. An empty or missing string gives
 * `bytes: null` (a NULL pointer, i.e. WGPU_STRLEN "no string"). */
export function utf8(s: string | undefined | null): { bytes: Uint8Array | null; len: number } {
  if (!s) return { bytes: null, len: 0 };
  const bytes = encoder.encode(s);
  return { bytes, len: bytes.length };
}

/** The message a callback stored in a zm_slot, decoded from UTF-8 ("" when none). */
export function slotMessage(native: Native, slot: Pointer): string {
  const p = native.shim.zm_slot_message(slot);
  const n = native.shim.zm_slot_message_len(slot);
  if (!p || !n) return "";
  return new CString(p, 0, n).toString();
}
