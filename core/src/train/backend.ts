/**
 * Backend choice of the trainer. `cpu` and `webgpu` go straight to `createBackend`
 * (kernels/src/select.ts). `auto` does too, with one trainer-specific rule: when the adapter
 * WebGPU offers is a CPU-type one (Mesa lavapipe/llvmpipe, a software Vulkan driver), the trainer
 * uses the TypeScript cpu backend instead, because on such an adapter the same tiny step runs
 * several times slower (measured 2026-11-29 on 2 cores, default job's model, forward + backward,
 * micro-batch 8 × 64 tokens: cpu 171 ms, webgpu on lavapipe 1269 ms). A real GPU (discrete,
 * integrated or virtual) keeps webgpu. `backend: "webgpu"` still forces the software adapter.
 */
import type { Backend } from "../../../kernels/src/backend.ts";
import { CpuBackend } from "../../../kernels/src/cpu/index.ts";
import { createBackend, type BackendKind } from "../../../kernels/src/select.ts";

/** The backend a rank trains on and the one-line reason for it (printed by rank 0). */
export interface TrainBackend {
  backend: Backend;
  reason: string;
}

/** Free a backend's device (webgpu backends hold one); a no-op for the cpu backend. */
export function destroyBackend(be: Backend): void {
  const d = (be as { destroy?: () => void }).destroy;
  if (typeof d === "function") d.call(be);
}

/**
 * Create the training backend of `kind` (see the module comment).
 * @throws Error when `kind` is "webgpu" and no working WebGPU device exists (createBackend's
 * message, which says why).
 */
export async function selectTrainBackend(kind: BackendKind): Promise<TrainBackend> {
  const sel = await createBackend(kind);
  if (kind !== "auto" || sel.backend.info.name !== "webgpu" || sel.backend.info.adapterType !== "cpu") return sel;
  const adapter = sel.backend.info.adapter;
  destroyBackend(sel.backend);
  return {
    backend: new CpuBackend(),
    reason:
      `auto → cpu (TypeScript): the WebGPU adapter "${adapter}" is a CPU-type (software Vulkan) one, on which a training step ` +
      `is several times slower than the TypeScript backend (default job: 1269 vs 171 ms per micro-batch on 2 cores); set backend "webgpu" to use it anyway`,
  };
}
