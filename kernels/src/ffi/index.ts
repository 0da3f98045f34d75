/**
 * The WebGPU JavaScript API (compute subset, typed by @webgpu/types) over wgpu-native 29.0.1.1
 * through bun:ffi. Everything above this folder is plain WebGPU.
 *
 *   const gpu = createGPU();
 *   const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
 *   const device = await adapter!.requestDevice({ requiredLimits: { maxBufferSize: adapter!.limits.maxBufferSize } });
 *
 * Where this binding differs from a browser (all deliberate, see each file):
 * - Errors are never silent. A validation/out-of-memory error outside an error scope is thrown as
 *   GPUUncapturedError from the call that caused it unless the device has an `uncapturederror`
 *   listener (then it is dispatched as the spec says). WGSL that does not compile makes
 *   createShaderModule throw GPUShaderCompilationError (message, lineNum, linePos). Errors of
 *   commandEncoder.finish() are delivered the same way even inside a user's error scope.
 * - wgpu-native 29 aborts the process on some misuse (a submit with a mapped or destroyed buffer,
 *   popping an empty error scope, the "internal" error filter, polling a lost device); the binding
 *   checks those first and throws instead.
 * - queue.writeBuffer data is flushed (an empty submit) before mapAsync/onSubmittedWorkDone, as the
 *   spec's queue ordering requires and wgpu otherwise does only at the next submit.
 * - Subgroups: wgpu-native offers them as the native feature "wgpu-subgroup" (not the standard
 *   "subgroups"); request that, and write the builtins without `enable subgroups;` (naga 29
 *   rejects the directive). Non-standard extras: GPUAdapterInfo.backendType/adapterType,
 *   requestAdapter({adapterIndex, backendType}), gpu.enumerateAdapters(), queue.getTimestampPeriod(),
 *   device.poll(), pass.setImmediates() with createPipelineLayout({immediateSize}).
 * - Render, texture and sampler APIs throw "not supported" (compute subset).
 * - Measured (kernels/test/ffi, H200 Vulkan, 2026-11-29): recording a dispatch into an open pass
 *   costs ~2 µs of host time but each begin/end of a compute pass ~35 µs in wgpu-native: put many
 *   dispatches in one pass.
 */
export { createGPU, enumerateAdapters, libraryVersion, GPUImpl, type CreateGPUOptions, type RequestAdapterOptionsEx } from "./gpu.ts";
export { GPUAdapterImpl, type AdapterInfoEx } from "./adapter.ts";
export { GPUDeviceImpl } from "./device.ts";
export { GPUBufferImpl } from "./buffer.ts";
export { GPUQueueImpl } from "./queue.ts";
export { GPUShaderModuleImpl, createShaderModuleTrusted, type ShaderRuntimeChecks } from "./shader.ts";
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
