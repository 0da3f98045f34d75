/** The pure TypeScript cpu backend. */
export { CpuBackend, type CpuBackendOptions } from "./cpu_backend.ts";
export type { CpuPrecision } from "./store.ts";
