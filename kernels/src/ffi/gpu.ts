/**
 * The entry points: `createGPU()` (a navigator.gpu-compatible GPU object over wgpu-native),
 * `enumerateAdapters()` (wgpuInstanceEnumerateAdapters from wgpu.h) and `libraryVersion()`
 * (wgpuGetVersion).
 */
import { ptr, type Pointer } from "../runtime/ffi.ts";
import { GPUAdapterImpl } from "./adapter.ts";
import { BACKEND_TYPES, installWebGPUGlobals, POWER_PREFERENCE } from "./constants.ts";
import { FFIContext } from "./context.ts";
import { EventPump, type PollMode } from "./events.ts";
import { loadNative, slotMessage, type Native } from "./native.ts";

/** Options of {@link createGPU}. */
export interface CreateGPUOptions {
  /** Path of libwgpu_native.so; default env WGPU_NATIVE_LIB, then the zeromoe cache. */
  libraryPath?: string;
  /** How pending promises wait once a short spin is over: "yield" (default; setTimeout polling,
   * never blocks the event loop) or "block" (waits in wgpuDevicePoll, lowest latency). */
  pollMode?: PollMode;
  /** Milliseconds of setImmediate polling before backing off (default 0.5). */
  spinMs?: number;
  /** Install GPUBufferUsage/GPUMapMode/GPUShaderStage on globalThis where absent (default true). */
  installGlobals?: boolean;
}

/** Non-standard options accepted by `requestAdapter` in addition to the spec's. */
export interface RequestAdapterOptionsEx extends GPURequestAdapterOptions {
  /** Pick this index of {@link GPUImpl.enumerateAdapters}' list instead of asking wgpu. */
  adapterIndex?: number;
  /** Restrict to a backend: "vulkan", "metal", "d3d12", "opengl", ... */
  backendType?: string;
}

/** WebGPU GPU (navigator.gpu) implemented over one WGPUInstance. */
export class GPUImpl {
  readonly __brand = "GPU" as const;
  readonly ctx: FFIContext;
  /** WGSL language extensions; wgpu-native's list is not queried (empty set). */
  readonly wgslLanguageFeatures = new Set<string>() as unknown as WGSLLanguageFeatures;

  constructor(native: Native, options: CreateGPUOptions = {}) {
    const instance = native.shim.zm_create_instance();
    if (!instance) throw new Error(`wgpuCreateInstance returned NULL (library ${native.location.libraryPath})`);
    const pump = new EventPump(native, instance, options.pollMode ?? "yield", options.spinMs ?? 0.5);
    this.ctx = new FFIContext(native, instance, pump);
    native.lib.wgpuInstanceProcessEvents(instance);
    // Every adapter, device and pump holds the context (and uses the instance through it), so the
    // instance is released when the context, not this GPU object, is collected.
    this.ctx.track(this.ctx, instance, "wgpuInstanceRelease");
  }

  /**
   * Spec requestAdapter: resolves with an adapter or null when none matches. `powerPreference`
   * ("high-performance" | "low-power"), `forceFallbackAdapter`, and the non-standard
   * `adapterIndex` / `backendType` of {@link RequestAdapterOptionsEx}.
   */
  async requestAdapter(options: RequestAdapterOptionsEx = {}): Promise<GPUAdapter | null> {
    const n = this.ctx.native;
    if (options.adapterIndex !== undefined) {
      const all = await this.enumerateAdapters();
      const a = all[options.adapterIndex];
      if (!a) throw new RangeError(`requestAdapter: adapterIndex ${options.adapterIndex} out of range (${all.length} adapters)`);
      return a;
    }
    let backend = 0;
    if (options.backendType !== undefined) {
      backend = BACKEND_TYPES.indexOf(options.backendType);
      if (backend < 0) throw new TypeError(`requestAdapter: unknown backendType '${options.backendType}' (one of ${BACKEND_TYPES.join(", ")})`);
    }
    const power = options.powerPreference ? (POWER_PREFERENCE[options.powerPreference] ?? 0) : 0;
    const slot = n.shim.zm_slot_new()!;
    n.shim.zm_request_adapter(this.ctx.instance, power, options.forceFallbackAdapter ? 1 : 0, backend, slot);
    return this.ctx.pump.wait(slot, null, "requestAdapter", (s) => {
      const status = n.shim.zm_slot_status(s);
      const h = n.shim.zm_slot_handle(s);
      if (status === 1 && h) return new GPUAdapterImpl(this.ctx, h) as unknown as GPUAdapter;
      if (status === 3) return null; // Unavailable
      throw new Error(`requestAdapter failed (status ${status}): ${slotMessage(n, s)}`);
    });
  }

  /** Every adapter wgpu-native finds on every backend (wgpuInstanceEnumerateAdapters). */
  async enumerateAdapters(): Promise<GPUAdapter[]> {
    const n = this.ctx.native;
    const count = Number(n.shim.zm_enumerate_adapters(this.ctx.instance, null));
    if (count === 0) return [];
    const handles = new BigUint64Array(count);
    n.shim.zm_enumerate_adapters(this.ctx.instance, ptr(handles));
    return Array.from(handles, (h) => new GPUAdapterImpl(this.ctx, Number(h) as unknown as Pointer) as unknown as GPUAdapter);
  }

  /** No canvas here: always throws. */
  getPreferredCanvasFormat(): GPUTextureFormat {
    throw new Error("getPreferredCanvasFormat: there is no canvas in this WebGPU binding (compute only)");
  }
}

/**
 * Create a navigator.gpu-compatible GPU object over wgpu-native. The library is found from
 * `options.libraryPath`, env WGPU_NATIVE_LIB, or `$ZEROMOE_CACHE/wgpu-native/29.0.1.1/`
 * (default cache `~/.cache/zeromoe`).
 * @throws WgpuLibraryNotFoundError naming the paths tried and `bash scripts/setup.sh`.
 */
export function createGPU(options: CreateGPUOptions = {}): GPU {
  if (options.installGlobals !== false) installWebGPUGlobals();
  return new GPUImpl(loadNative(options.libraryPath), options) as unknown as GPU;
}

let defaultGPU: GPUImpl | null = null;

/** All adapters of a process-wide default GPU (created on first use). */
export function enumerateAdapters(options: { libraryPath?: string } = {}): Promise<GPUAdapter[]> {
  if (options.libraryPath) return (createGPU(options) as unknown as GPUImpl).enumerateAdapters();
  defaultGPU ??= createGPU() as unknown as GPUImpl;
  return defaultGPU.enumerateAdapters();
}

/** wgpu-native's version as "major.minor.patch.build" (wgpuGetVersion packs one byte each). */
export function libraryVersion(options: { libraryPath?: string } = {}): string {
  const v = loadNative(options.libraryPath).lib.wgpuGetVersion() >>> 0;
  return [(v >>> 24) & 0xff, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff].join(".");
}
