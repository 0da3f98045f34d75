/** Public entry of @zeromoe/kernels: the device contract and the backends. */
export * from "./backend.ts";
export { CpuBackend, type CpuBackendOptions, type CpuPrecision } from "./cpu/index.ts";
export { createGPU, enumerateAdapters, libraryVersion, type CreateGPUOptions } from "./ffi/index.ts";
