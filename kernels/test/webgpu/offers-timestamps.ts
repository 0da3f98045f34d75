/**
 * Whether a GPU's default adapter offers the `timestamp-query` feature (W3C WebGPU §"Timestamp
 * Query"), which WebGpuBackend's `profile` and `timeline` options need; tests of those options use
 * it to take the path the adapter allows (lavapipe offers it; other drivers may not).
 */
import { WebGpuBackend } from "../../src/webgpu/index.ts";

/** Creates a throwaway WebGpuBackend on `gpu`, reads whether its device has "timestamp-query",
 * destroys it. Throws whatever WebGpuBackend.create throws (no adapter, device lost). */
export async function offersTimestamps(gpu: GPU): Promise<boolean> {
  const probe = await WebGpuBackend.create(gpu);
  const offered = probe.info.features.includes("timestamp-query");
  probe.destroy();
  return offered;
}
