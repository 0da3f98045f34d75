/**
 * The op conformance suite (kernels/test/ops, float64 references) on {@link WebGpuBackend} over our
 * wgpu-native binding (kernels/src/ffi) — lavapipe in CI, so the large sizes are scaled down.
 * Prints the adapter it ran on.
 */
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { runOpSuite } from "../ops/index.ts";

runOpSuite(
  "webgpu",
  async () => {
    const be = await WebGpuBackend.create(createGPU());
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
