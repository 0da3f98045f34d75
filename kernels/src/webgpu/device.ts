/**
 * Opening a WebGPU adapter and device with the adapter's full limits and the optional features the
 * engine uses (W3C WebGPU §"requestAdapter", §"requestDevice").
 *
 * The defaults of `requestDevice` are small (128 MiB storage binding, 256 MiB buffer, docs/domain.md §6);
 * every limit the engine depends on is requested at the adapter's maximum.
 */
import type { BackendInfo } from "../backend.ts";

/** Options of {@link openDevice}. */
export interface OpenDeviceOptions {
  /** Passed to `requestAdapter`. */
  powerPreference?: GPUPowerPreference;
  /** Pick the n-th adapter of an implementation that enumerates several (a non-standard
   * `gpu.enumerateAdapters?()`, which our ffi binding has); when absent, `requestAdapter` with
   * `powerPreference` picks. An implementation without enumeration accepts only index 0. */
  adapterIndex?: number;
}

/** An opened device plus what the backend needs to know about it. */
export interface OpenedDevice {
  adapter: GPUAdapter;
  device: GPUDevice;
  info: BackendInfo;
}

/** Limits requested at the adapter's value when it offers more than the default. */
const WANTED_LIMITS = [
  "maxStorageBufferBindingSize",
  "maxBufferSize",
  "maxComputeWorkgroupStorageSize",
  "maxComputeInvocationsPerWorkgroup",
  "maxComputeWorkgroupSizeX",
  "maxComputeWorkgroupSizeY",
  "maxComputeWorkgroupSizeZ",
  "maxComputeWorkgroupsPerDimension",
  "maxStorageBuffersPerShaderStage",
  "maxUniformBufferBindingSize",
  "maxBindGroups",
] as const;

/** Optional features enabled when offered. */
const WANTED_FEATURES = ["shader-f16", "timestamp-query", "wgpu-cooperative-matrix"] as const;

/** Wanted features that a library may list yet refuse to enable (wgpu's experimental features);
 * {@link openDevice} retries without them. */
const EXPERIMENTAL_FEATURES: readonly string[] = ["wgpu-cooperative-matrix"];

/** Classify an adapter for {@link BackendInfo.adapterType}. Uses a non-standard `adapterType` field
 * when the implementation provides one, else the description: software rasterisers (llvmpipe,
 * lavapipe, SwiftShader, WARP) are "cpu". */
export function classifyAdapter(info: GPUAdapterInfo): string {
  const extra = info as unknown as { adapterType?: unknown; type?: unknown };
  const t = typeof extra.adapterType === "string" ? extra.adapterType : typeof extra.type === "string" ? extra.type : "";
  const norm = t.toLowerCase().replace(/[_ ]/g, "-");
  if (["discrete-gpu", "integrated-gpu", "cpu", "virtual-gpu"].includes(norm)) return norm;
  if (norm === "discretegpu") return "discrete-gpu";
  if (norm === "integratedgpu") return "integrated-gpu";
  const d = `${info.description} ${info.device}`.toLowerCase();
  if (/llvmpipe|lavapipe|swiftshader|warp|software/.test(d)) return "cpu";
  return "unknown";
}

function adapterBackendName(info: GPUAdapterInfo): string {
  const extra = info as unknown as { backendType?: unknown; backend?: unknown };
  if (typeof extra.backendType === "string") return extra.backendType;
  if (typeof extra.backend === "string") return extra.backend;
  return "unknown";
}

/**
 * Request an adapter and a device from `gpu`. Throws with a message naming the step that failed
 * (no adapter, requestDevice rejected).
 */
export async function openDevice(gpu: GPU, opts: OpenDeviceOptions = {}): Promise<OpenedDevice> {
  let adapter: GPUAdapter | null = null;
  const idx = opts.adapterIndex ?? 0;
  const enumerate = (gpu as unknown as { enumerateAdapters?: () => Promise<GPUAdapter[]> | GPUAdapter[] }).enumerateAdapters;
  if (opts.adapterIndex !== undefined && typeof enumerate === "function") {
    const list = await enumerate.call(gpu);
    if (idx < 0 || idx >= list.length) throw new Error(`webgpu: adapterIndex ${idx} out of range (${list.length} adapters)`);
    adapter = list[idx]!;
  } else {
    if (idx !== 0) throw new Error(`webgpu: adapterIndex ${idx} requested but this WebGPU implementation cannot enumerate adapters (only index 0)`);
    adapter = await gpu.requestAdapter(opts.powerPreference ? { powerPreference: opts.powerPreference } : undefined);
  }
  if (!adapter) throw new Error("webgpu: requestAdapter returned null (no WebGPU adapter on this machine)");
  const requiredLimits: Record<string, number> = {};
  const lim = adapter.limits as unknown as Record<string, number | undefined>;
  for (const k of WANTED_LIMITS) {
    const v = lim[k];
    if (typeof v === "number") requiredLimits[k] = v;
  }
  let requiredFeatures = WANTED_FEATURES.filter((f) => adapter.features.has(f)) as GPUFeatureName[];
  let device: GPUDevice;
  try {
    device = await adapter.requestDevice({ requiredLimits, requiredFeatures, label: "zeromoe" });
  } catch (e) {
    // An adapter may list an experimental feature that its library will not enable (the prebuilt
    // wgpu-native lists wgpu-cooperative-matrix on NVIDIA but refuses it: "experimental features
    // are not enabled"). The feature is optional: ask again without the experimental ones.
    const optional = requiredFeatures.filter((f) => !EXPERIMENTAL_FEATURES.includes(f as string));
    if (optional.length === requiredFeatures.length) throw new Error(`webgpu: requestDevice failed with limits ${JSON.stringify(requiredLimits)} and features [${requiredFeatures}]: ${(e as Error).message}`);
    requiredFeatures = optional;
    try {
      device = await adapter.requestDevice({ requiredLimits, requiredFeatures, label: "zeromoe" });
    } catch (e2) {
      throw new Error(`webgpu: requestDevice failed with limits ${JSON.stringify(requiredLimits)} and features [${requiredFeatures}] (and once more with the experimental ones: ${(e as Error).message}): ${(e2 as Error).message}`);
    }
  }
  const ai: GPUAdapterInfo = adapter.info;
  return { adapter, device, info: { name: "webgpu", adapter: adapterName(ai), adapterBackend: adapterBackendName(ai), adapterType: classifyAdapter(ai), features: [...device.features].sort() } };
}

/** Human-readable adapter name: wgpu-native puts the device name ("NVIDIA H200", "llvmpipe (…)")
 * in `device` and driver information in `description`; Deno puts the name in `description` and a
 * numeric id in `device`. Takes `device` unless it is empty or numeric. */
export function adapterName(ai: GPUAdapterInfo): string {
  const dev = (ai.device ?? "").trim();
  if (dev !== "" && !/^(0x)?[0-9a-f]+$/i.test(dev)) return dev;
  return (ai.description || ai.vendor || "unknown adapter").trim();
}
