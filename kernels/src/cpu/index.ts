/** The pure TypeScript cpu backend. */
export { CpuBackend, type CpuBackendOptions } from "./cpu-backend.ts";
export type { CpuPrecision } from "./store.ts";
