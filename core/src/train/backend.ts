/**
 * Backend choice of the trainer: `createBackend` (kernels/src/select.ts) as it is. `auto` picks
 * webgpu whenever a real adapter computes correctly — Mesa's lavapipe (a CPU-type software Vulkan
 * adapter) included, reported as such in the reason line — and falls back to the TypeScript cpu
 * backend, saying why, when none does. (Measured 2026-11-29 on 2 shared cores, default job: webgpu
 * on lavapipe 1634 tokens/s vs cpu about 2200–2800; both give the same losses.)
 */
import type { Backend } from "@zeromoe/kernels";
import { createBackend, type BackendKind } from "@zeromoe/kernels";

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
 * Create the training backend of `kind` (see the module comment) for the rank with index
 * `localRank` on this machine: with several GPUs, each rank takes its own (kernels/src/select.ts
 * `adapterIndexForRank`). The `local` transport runs all ranks on one host, so local rank = rank.
 * @throws Error when `kind` is "webgpu" and no working WebGPU device exists (createBackend's
 * message, which says why).
 */
export async function selectTrainBackend(kind: BackendKind, localRank = 0): Promise<TrainBackend> {
  return createBackend(kind, { localRank });
}
