/**
 * WebGPU constants and the mapping between WebGPU JavaScript strings and webgpu.h enum values
 * (wgpu-native 29.0.1.1 headers; values checked against webgpu.h and wgpu.h).
 */

/** GPUBufferUsage flags (WebGPU spec §5.1; same bit values as WGPUBufferUsage in webgpu.h). */
export const GPUBufferUsageFlags = Object.freeze({
  MAP_READ: 0x0001,
  MAP_WRITE: 0x0002,
  COPY_SRC: 0x0004,
  COPY_DST: 0x0008,
  INDEX: 0x0010,
  VERTEX: 0x0020,
  UNIFORM: 0x0040,
  STORAGE: 0x0080,
  INDIRECT: 0x0100,
  QUERY_RESOLVE: 0x0200,
});

/** GPUMapMode flags (WebGPU spec §5.2; same as WGPUMapMode). */
export const GPUMapModeFlags = Object.freeze({ READ: 0x0001, WRITE: 0x0002 });

/** GPUShaderStage flags (WebGPU spec §8.1; same as WGPUShaderStage). */
export const GPUShaderStageFlags = Object.freeze({ VERTEX: 0x1, FRAGMENT: 0x2, COMPUTE: 0x4 });

/**
 * Install `GPUBufferUsage`, `GPUMapMode` and `GPUShaderStage` on `globalThis` where absent (Bun has
 * no WebGPU globals; code written for browsers and Deno uses them). Never overwrites existing ones.
 */
export function installWebGPUGlobals(): void {
  const g = globalThis as Record<string, unknown>;
  if (g.GPUBufferUsage === undefined) g.GPUBufferUsage = GPUBufferUsageFlags;
  if (g.GPUMapMode === undefined) g.GPUMapMode = GPUMapModeFlags;
  if (g.GPUShaderStage === undefined) g.GPUShaderStage = GPUShaderStageFlags;
}

/** WebGPU feature name → WGPUFeatureName (standard, webgpu.h) or WGPUNativeFeature (wgpu.h). */
export const FEATURE_IDS: Readonly<Record<string, number>> = Object.freeze({
  "core-features-and-limits": 0x01,
  "depth-clip-control": 0x02,
  "depth32float-stencil8": 0x03,
  "texture-compression-bc": 0x04,
  "texture-compression-bc-sliced-3d": 0x05,
  "texture-compression-etc2": 0x06,
  "texture-compression-astc": 0x07,
  "texture-compression-astc-sliced-3d": 0x08,
  "timestamp-query": 0x09,
  "indirect-first-instance": 0x0a,
  "shader-f16": 0x0b,
  "rg11b10ufloat-renderable": 0x0c,
  "bgra8unorm-storage": 0x0d,
  "float32-filterable": 0x0e,
  "float32-blendable": 0x0f,
  "clip-distances": 0x10,
  "dual-source-blending": 0x11,
  subgroups: 0x12,
  "texture-formats-tier1": 0x13,
  "texture-formats-tier2": 0x14,
  "primitive-index": 0x15,
  "texture-component-swizzle": 0x16,
  // wgpu-native extensions (wgpu.h WGPUNativeFeature), named as wgpu's Rust `Features` in kebab case.
  "wgpu-immediates": 0x30001,
  "wgpu-texture-adapter-specific-format-features": 0x30002,
  "wgpu-multi-draw-indirect-count": 0x30004,
  "wgpu-vertex-writable-storage": 0x30005,
  "wgpu-texture-binding-array": 0x30006,
  "wgpu-sampled-texture-and-storage-buffer-array-non-uniform-indexing": 0x30007,
  "wgpu-pipeline-statistics-query": 0x30008,
  "wgpu-storage-resource-binding-array": 0x30009,
  "wgpu-partially-bound-binding-array": 0x3000a,
  "wgpu-texture-format-16bit-norm": 0x3000b,
  "wgpu-texture-compression-astc-hdr": 0x3000c,
  "wgpu-mappable-primary-buffers": 0x3000e,
  "wgpu-buffer-binding-array": 0x3000f,
  "wgpu-storage-texture-array-non-uniform-indexing": 0x30010,
  "wgpu-address-mode-clamp-to-zero": 0x30011,
  "wgpu-address-mode-clamp-to-border": 0x30012,
  "wgpu-polygon-mode-line": 0x30013,
  "wgpu-polygon-mode-point": 0x30014,
  "wgpu-conservative-rasterization": 0x30015,
  "wgpu-clear-texture": 0x30016,
  "wgpu-multiview": 0x30018,
  "wgpu-vertex-attribute-64bit": 0x30019,
  "wgpu-texture-format-nv12": 0x3001a,
  "wgpu-ray-query": 0x3001c,
  "wgpu-shader-f64": 0x3001d,
  "wgpu-shader-i16": 0x3001e,
  "wgpu-shader-early-depth-test": 0x30020,
  "wgpu-subgroup": 0x30021,
  "wgpu-subgroup-vertex": 0x30022,
  "wgpu-subgroup-barrier": 0x30023,
  "wgpu-timestamp-query-inside-encoders": 0x30024,
  "wgpu-timestamp-query-inside-passes": 0x30025,
  "wgpu-shader-int64": 0x30026,
  "wgpu-shader-float32-atomic": 0x30027,
  "wgpu-texture-atomic": 0x30028,
  "wgpu-texture-format-p010": 0x30029,
  "wgpu-pipeline-cache": 0x3002b,
  "wgpu-shader-int64-atomic-min-max": 0x3002c,
  "wgpu-shader-int64-atomic-all-ops": 0x3002d,
  "wgpu-texture-int64-atomic": 0x30030,
  "wgpu-shader-barycentrics": 0x30037,
  "wgpu-selective-multiview": 0x30038,
  "wgpu-multisample-array": 0x3003a,
  "wgpu-cooperative-matrix": 0x3003b,
  "wgpu-shader-per-vertex": 0x3003c,
  "wgpu-shader-draw-index": 0x3003d,
  "wgpu-acceleration-structure-binding-array": 0x3003e,
  "wgpu-memory-decoration-coherent": 0x3003f,
  "wgpu-memory-decoration-volatile": 0x30040,
});

/** WGPUFeatureName/WGPUNativeFeature value → feature name (unknown values become `wgpu-0x…`). */
export function featureName(id: number): string {
  for (const [k, v] of Object.entries(FEATURE_IDS)) if (v === id) return k;
  return `wgpu-0x${id.toString(16)}`;
}

/** WGPUBackendType → name. */
export const BACKEND_TYPES: readonly string[] = ["undefined", "null", "webgpu", "d3d11", "d3d12", "metal", "vulkan", "opengl", "opengles"];

/** WGPUAdapterType → name, as in `BackendInfo.adapterType` (kernels/src/backend.ts). */
export const ADAPTER_TYPES: readonly string[] = ["unknown", "discrete-gpu", "integrated-gpu", "cpu", "unknown"];

/** GPUPowerPreference → WGPUPowerPreference. */
export const POWER_PREFERENCE: Readonly<Record<string, number>> = { "low-power": 1, "high-performance": 2 };

/** GPUBufferBindingType → WGPUBufferBindingType. */
export const BUFFER_BINDING_TYPE: Readonly<Record<string, number>> = { uniform: 2, storage: 3, "read-only-storage": 4 };

/** GPUErrorFilter → WGPUErrorFilter. */
export const ERROR_FILTER: Readonly<Record<string, number>> = { validation: 1, "out-of-memory": 2, internal: 3 };

/** WGPUErrorType values. */
export const ERROR_TYPE = { noError: 1, validation: 2, outOfMemory: 3, internal: 4, unknown: 5 } as const;

/** WGPUQueryType values. */
export const QUERY_TYPE: Readonly<Record<string, number>> = { occlusion: 1, timestamp: 2 };

/** WGPUDeviceLostReason → GPUDeviceLostReason ("unknown" | "destroyed"). */
export function deviceLostReason(v: number): GPUDeviceLostReason {
  return v === 2 ? "destroyed" : "unknown";
}

/** Sentinels of webgpu.h. */
export const WGPU_WHOLE_SIZE = 0xffffffffffffffffn;
export const WGPU_QUERY_SET_INDEX_UNDEFINED = 0xffffffff;
