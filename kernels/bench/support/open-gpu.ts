/**
 * The `GPU` object a benchmark runs on: the runtime's own `navigator.gpu` when it has one (Deno,
 * browsers), else wgpu-native through our FFI binding (`createGPU()` of kernels/src/ffi/index.ts,
 * which honours `WGPU_NATIVE_LIB`).
 */
import { openDevice, type OpenedDevice } from "../../src/webgpu/device.ts";

/** Where the GPU object came from. */
export type GpuSource = "navigator.gpu" | "wgpu-native ffi";

/** Returns a WebGPU `GPU`. Throws naming both sources tried when neither is available. */
export async function acquireGPU(): Promise<{ gpu: GPU; source: GpuSource }> {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (nav?.gpu) return { gpu: nav.gpu, source: "navigator.gpu" };
  // Path held in a variable: the FFI package is another area's and is resolved at run time.
  const ffiPath = new URL("../../src/ffi/index.ts", import.meta.url).href;
  let mod: { createGPU?: () => GPU | Promise<GPU> };
  try {
    mod = (await import(ffiPath)) as typeof mod;
  } catch (e) {
    throw new Error(`bench: no navigator.gpu and the wgpu-native binding (${ffiPath}) failed to load: ${(e as Error).message}`);
  }
  if (typeof mod.createGPU !== "function") throw new Error(`bench: ${ffiPath} does not export createGPU()`);
  return { gpu: await mod.createGPU(), source: "wgpu-native ffi" };
}

/** Acquires a GPU and opens the device with the adapter's limits and features (see openDevice). */
export async function openBenchDevice(): Promise<OpenedDevice & { source: GpuSource }> {
  const { gpu, source } = await acquireGPU();
  const opened = await openDevice(gpu);
  return { ...opened, source };
}
