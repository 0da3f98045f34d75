/**
 * GPU time per call of a piece of work on a {@link WebGpuBackend} created with `profile: true`,
 * from the backend's per-dispatch timestamps (W3C WebGPU "timestamp-query"), with an optional
 * "heater": GPU work recorded right before the timed calls so the clocks are up when they run (an
 * H200's SM clock falls from 1980 toward 345 MHz within a second of light load, and every timed
 * batch follows a host wait). Used by the matmul benchmarks of kernels/bench and core/bench.
 */
import type { WebGpuBackend } from "../webgpu/index.ts";

/** Label fragment of the heater's kernels, left out of the sums: the heater must run a kernel whose
 * label contains it (a matmul with transA and transB) and the timed work must not. */
export const HEATER_TAG = "tAtB";

/** Result of {@link gpuMsPerCall}. */
export interface GpuCallTime {
  /** GPU milliseconds per call: the summed timestamps of every dispatch except the heater's,
   * divided by the number of calls. */
  ms: number;
  /** The kernels the calls ran, as "label×dispatches per call". */
  kernels: string[];
}

/**
 * Runs `heater` (when given), then `fn` `calls` times, and returns the GPU time per call.
 * Resets the backend's profile before and after.
 *
 * @param be a WebGpuBackend created with `profile: true`.
 * @param calls number of calls of `fn` (a positive integer).
 * @param fn records one call of the work to time.
 * @param heater records the warm-up work; its kernels' labels must contain {@link HEATER_TAG}.
 * @throws whatever `be.profile()` throws (e.g. a backend without profiling).
 */
export async function gpuMsPerCall(be: WebGpuBackend, calls: number, fn: () => void, heater?: (() => void) | null): Promise<GpuCallTime> {
  be.resetProfile();
  heater?.();
  for (let i = 0; i < calls; i++) fn();
  const rows = (await be.profile()).filter((r) => !r.label.includes(HEATER_TAG));
  be.resetProfile();
  return { ms: rows.reduce((x, r) => x + r.ns, 0) / 1e6 / calls, kernels: rows.map((r) => `${r.label}×${r.dispatches / calls}`) };
}
