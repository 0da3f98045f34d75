/**
 * GPUAdapter over a WGPUAdapter: info, features, limits, and requestDevice (WebGPU spec §4.4).
 */
import { ptr, type Pointer } from "../runtime/ffi.ts";
import { ADAPTER_TYPES, BACKEND_TYPES, FEATURE_IDS, featureName } from "./constants.ts";
import type { FFIContext } from "./context.ts";
import { GPUDeviceImpl } from "./device.ts";
import { domError } from "./errors.ts";
import { slotMessage, utf8, type Native } from "./native.ts";
import { collectGarbage } from "../runtime/gc.ts";

/** GPUAdapterInfo plus wgpu-native's backend and adapter type (non-standard, for reports). */
export interface AdapterInfoEx extends GPUAdapterInfo {
  /** "vulkan" | "metal" | "d3d12" | "opengl" | ... (WGPUBackendType). */
  readonly backendType: string;
  /** "discrete-gpu" | "integrated-gpu" | "cpu" | "unknown" (WGPUAdapterType). */
  readonly adapterType: string;
  /** PCI vendor id, device id (0 when unknown). */
  readonly vendorID: number;
  readonly deviceID: number;
}

/** Read WGPUAdapterInfo of an adapter (or, with `adapter` null, of a device's adapter). */
export function readAdapterInfo(native: Native, adapter: Pointer | null, device: Pointer | null): AdapterInfoEx {
  const nums = new Uint32Array(6);
  const cap = 4 * 512;
  const strs = new Uint8Array(cap);
  const st = native.shim.zm_adapter_info(adapter, device, ptr(nums), ptr(strs), cap);
  if (st !== 1) throw new Error(`wgpuAdapterGetInfo failed with WGPUStatus ${st}`);
  const dec = new TextDecoder();
  const part = (i: number) => {
    const s = strs.subarray(i * 512, (i + 1) * 512);
    const end = s.indexOf(0);
    return dec.decode(s.subarray(0, end < 0 ? s.length : end));
  };
  const adapterType = ADAPTER_TYPES[nums[1]] ?? "unknown";
  return {
    __brand: "GPUAdapterInfo",
    vendor: part(0),
    architecture: part(1),
    device: part(2),
    description: part(3),
    subgroupMinSize: nums[4],
    subgroupMaxSize: nums[5],
    isFallbackAdapter: adapterType === "cpu",
    backendType: BACKEND_TYPES[nums[0]] ?? `backend-${nums[0]}`,
    adapterType,
    vendorID: nums[2],
    deviceID: nums[3],
  } as AdapterInfoEx;
}

/** Names of the limits in WGPULimits order, read from the shim (no duplicated layout). */
export function limitNames(native: Native): string[] {
  const n = native.shim.zm_limit_count();
  const names: string[] = [];
  for (let i = 0; i < n; i++) names.push(String(native.shim.zm_limit_name(i)));
  return names;
}

/** Read WGPULimits of an adapter or device as a frozen GPUSupportedLimits-shaped object. */
export function readLimits(native: Native, adapter: Pointer | null, device: Pointer | null): GPUSupportedLimits {
  const names = limitNames(native);
  const out = new BigUint64Array(names.length);
  const st = native.shim.zm_get_limits(adapter, device, ptr(out));
  if (st !== 1) throw new Error(`wgpu${adapter ? "Adapter" : "Device"}GetLimits failed with WGPUStatus ${st}`);
  const o: Record<string, number> = {};
  names.forEach((n, i) => (o[n] = Number(out[i])));
  // Non-enumerable so that `{ ...adapter.limits }` is a valid `requiredLimits`.
  Object.defineProperty(o, "__brand", { value: "GPUSupportedLimits", enumerable: false });
  return Object.freeze(o) as unknown as GPUSupportedLimits;
}

/** Read the feature list of an adapter or device as a GPUSupportedFeatures set of names. */
export function readFeatures(native: Native, adapter: Pointer | null, device: Pointer | null): GPUSupportedFeatures {
  const cap = 256;
  const ids = new Uint32Array(cap);
  const n = Number(native.shim.zm_get_features(adapter, device, ptr(ids), cap));
  const names = Array.from(ids.subarray(0, Math.min(n, cap)), featureName);
  return new Set(names) as unknown as GPUSupportedFeatures;
}

/** WebGPU GPUAdapter implemented over a WGPUAdapter handle. */
export class GPUAdapterImpl {
  readonly __brand = "GPUAdapter" as const;
  readonly features: GPUSupportedFeatures;
  readonly limits: GPUSupportedLimits;
  readonly info: AdapterInfoEx;
  /** Deprecated in the spec; kept for code that still reads it. */
  readonly isFallbackAdapter: boolean;

  /** @param handle a WGPUAdapter this object now owns (released when garbage-collected). */
  constructor(
    private readonly ctx: FFIContext,
    readonly handle: Pointer,
  ) {
    const n = ctx.native;
    this.info = readAdapterInfo(n, handle, null);
    this.limits = readLimits(n, handle, null);
    this.features = readFeatures(n, handle, null);
    this.isFallbackAdapter = this.info.isFallbackAdapter;
    ctx.track(this, handle, "wgpuAdapterRelease");
  }

  /**
   * Create a device. `requiredFeatures` must be offered by the adapter (else TypeError);
   * `requiredLimits` names WGPULimits fields, each no better than the adapter's (else an
   * OperationError). Ask for `adapter.limits.maxStorageBufferBindingSize`/`maxBufferSize` to lift
   * the small defaults (docs/domain.md §6). When the driver refuses the device, garbage is collected
   * (dropped devices are released when their wrappers are finalized; NVIDIA caps a process at 63
   * live devices) and the request is tried once more; the OperationError then names both failures.
   */
  async requestDevice(descriptor: GPUDeviceDescriptor = {}): Promise<GPUDevice> {
    const n = this.ctx.native;
    const feats = Array.from(descriptor.requiredFeatures ?? []);
    const ids = new Uint32Array(Math.max(1, feats.length));
    feats.forEach((f, i) => {
      const id = FEATURE_IDS[f];
      if (id === undefined || !this.features.has(f)) {
        throw new TypeError(`requestDevice: feature '${f}' is not supported by adapter '${this.info.description || this.info.device}'`);
      }
      ids[i] = id;
    });
    let limits: BigUint64Array | null = null;
    if (descriptor.requiredLimits) {
      const names = limitNames(n);
      limits = new BigUint64Array(names.length).fill(0xffffffffffffffffn);
      const adapterLimits = this.limits as unknown as Record<string, number>;
      for (const [key, value] of Object.entries(descriptor.requiredLimits)) {
        if (value === undefined || key === "__brand") continue;
        const i = names.indexOf(key);
        if (i < 0) throw domError("OperationError", `requestDevice: requiredLimits.${key} is not a known limit`);
        const better = key.startsWith("min") ? value < adapterLimits[key] : value > adapterLimits[key];
        if (better) {
          throw domError("OperationError", `requestDevice: requiredLimits.${key} = ${value} exceeds the adapter's ${adapterLimits[key]}`);
        }
        limits[i] = BigInt(value);
      }
    }
    const label = utf8(descriptor.label);
    const attempt = (): Promise<GPUDevice> => {
      const slot = n.shim.zm_slot_new()!;
      const lostSlot = n.shim.zm_slot_new()!;
      const errq = n.shim.zm_errq_new()!;
      n.shim.zm_request_device(this.handle, ptr(ids), feats.length, limits ? ptr(limits) : null, label.bytes, label.len, slot, lostSlot, errq);
      return this.ctx.pump.wait(slot, null, "requestDevice", (s) => {
        const status = n.shim.zm_slot_status(s);
        const handle = n.shim.zm_slot_handle(s);
        if (status !== 1 || !handle) {
          n.shim.zm_slot_free(lostSlot);
          n.shim.zm_errq_free(errq);
          throw domError("OperationError", `requestDevice failed (status ${status}): ${slotMessage(n, s)}`);
        }
        return new GPUDeviceImpl(this.ctx, handle, this, lostSlot, errq, descriptor.label ?? "") as unknown as GPUDevice;
      });
    };
    try {
      return await attempt();
    } catch (first) {
      // Devices the program dropped stay alive in the driver until their wrappers are finalized
      // (ffi/context.ts releases the handle then), and drivers cap live devices per process
      // (NVIDIA: 63, the 64th fails with "Parent device is lost"): collect garbage and try once more.
      await collectDroppedHandles();
      try {
        return await attempt();
      } catch (second) {
        throw domError("OperationError", `${(second as Error).message} (first attempt: ${(first as Error).message}; retried after collecting dropped devices)`);
      }
    }
  }

  /** Deprecated spec method; returns `info`. */
  async requestAdapterInfo(): Promise<GPUAdapterInfo> {
    return this.info;
  }
}

/** Rounds of garbage collection (each followed by a 5 ms pause so finalizers run) before a failed
 * requestDevice is retried. */
const COLLECT_ROUNDS = 8;

/** Force garbage collection so that wrappers the program no longer references are finalized and
 * their native handles released (FinalizationRegistry callbacks run in later ticks). */
async function collectDroppedHandles(): Promise<void> {
  for (let i = 0; i < COLLECT_ROUNDS; i++) {
    collectGarbage();
    await new Promise((r) => setTimeout(r, 5));
  }
}
