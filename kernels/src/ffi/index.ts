/**
 * The WebGPU JavaScript API (compute subset, typed by @webgpu/types) over wgpu-native 29.0.1.1
 * through bun:ffi. Everything above this folder is plain WebGPU.
 *
 *   const gpu = createGPU();
 *   const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
 *   const device = await adapter!.requestDevice({ requiredLimits: { maxBufferSize: adapter!.limits.maxBufferSize } });
 */
export { createGPU, enumerateAdapters, libraryVersion, GPUImpl, type CreateGPUOptions, type RequestAdapterOptionsEx } from "./gpu.ts";
export { GPUAdapterImpl, type AdapterInfoEx } from "./adapter.ts";
export { GPUDeviceImpl } from "./device.ts";
export { GPUBufferImpl } from "./buffer.ts";
export { GPUQueueImpl } from "./queue.ts";
export { GPUShaderModuleImpl } from "./shader.ts";
export { GPUComputePipelineImpl } from "./pipeline.ts";
export { GPUBindGroupImpl, GPUBindGroupLayoutImpl, GPUPipelineLayoutImpl } from "./binding.ts";
export { GPUCommandBufferImpl, GPUCommandEncoderImpl, GPUComputePassEncoderImpl } from "./encoder.ts";
export { GPUQuerySetImpl } from "./query.ts";
export {
  GPUDeviceLostError,
  GPUShaderCompilationError,
  GPUUncapturedError,
  GPUValidationErrorImpl,
  GPUOutOfMemoryErrorImpl,
  GPUInternalErrorImpl,
  GPUPipelineErrorImpl,
  type WGSLDiagnostic,
} from "./errors.ts";
export { GPUBufferUsageFlags, GPUMapModeFlags, GPUShaderStageFlags, installWebGPUGlobals } from "./constants.ts";
export { resolveLibrary, WgpuLibraryNotFoundError, WGPU_NATIVE_VERSION, defaultLibraryDir } from "./library.ts";
export type { PollMode } from "./events.ts";
