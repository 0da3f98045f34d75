/** Public entry of @zeromoe/kernels: the device contract and the backends. */
export * from "./backend.ts";
export { CpuBackend, type CpuBackendOptions, type CpuPrecision } from "./cpu/index.ts";
