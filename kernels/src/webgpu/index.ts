/** The webgpu backend: {@link WebGpuBackend} on any standard WebGPU implementation. */
export { WebGpuBackend, type MatmulTuning, type WebGpuBackendOptions, type WebGpuStats } from "./backend.ts";
export { openDevice, classifyAdapter, adapterName, type OpenDeviceOptions, type OpenedDevice } from "./device.ts";
export type { KernelTime } from "./profiler.ts";
export type { BatchTiming, SubmitReason } from "./timeline.ts";
