/**
 * The op conformance suite (kernels/test/ops, float64 references) on {@link WebGpuBackend} over our
 * wgpu-native binding (kernels/src/ffi) — lavapipe in CI, so the large sizes are scaled down.
 * Under `deno test` the same suite runs on Deno's built-in navigator.gpu (the binding is Bun-only;
 * README "Bun or Deno"). Prints the adapter it ran on.
 */
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { runOpSuite } from "../ops/index.ts";
import { FFI_AVAILABLE } from "../../src/runtime/ffi.ts";
import { ensureRuntimeDir } from "../../src/ffi/runtime-dir.ts";

runOpSuite(
  "webgpu",
  async () => {
    if (!FFI_AVAILABLE) ensureRuntimeDir();
    const be = await WebGpuBackend.create(FFI_AVAILABLE ? createGPU() : (navigator as unknown as { gpu: GPU }).gpu);
    console.log(`webgpu ops suite on: ${be.info.adapter} (${be.info.adapterType}, ${be.info.adapterBackend}); features ${be.info.features.join(",")}`);
    return be;
  },
  {
    tol: { rtol: 1e-4, atol: 1e-5 },
    sizeScale: Number(process.env.ZEROMOE_OPS_SIZE_SCALE ?? 0.25),
    timeoutMs: 60000,
    dispose: (be) => (be as WebGpuBackend).destroy(),
  },
);
