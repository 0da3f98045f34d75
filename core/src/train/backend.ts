/**
 * Backend choice of the trainer (and of `bun run generate` / `bun run eval`): `createBackend`
 * (kernels/src/select.ts) with a speed probe shaped like the job. `auto` takes a hardware WebGPU
 * adapter when one computes correctly; when the only adapter is a software (CPU-type) one such as
 * Mesa's lavapipe, it races it against the TypeScript cpu backend on the probe and keeps the faster,
 * giving both times in the reason line; with no working adapter it falls back to cpu, saying why.
 * (Measured 2026-12-01 on this 2-core machine, default job: cpu ≈ 2.3× faster than lavapipe on the
 * probe, and auto picks cpu; both give the same losses.)
 */
import type { Backend } from "@zeromoe/kernels";
import { createBackend, type BackendKind, type ProbeShape } from "@zeromoe/kernels";
import type { ModelConfig } from "../config/types.ts";

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
 * The speed-probe shape of a job (kernels/src/speed-probe.ts): `tokens` per forward (micro-batch ×
 * sequence length for training, 1 for token-by-token generation), the model's hidden size and its
 * feed-forward width (`moe_intermediate_size` for sparse families that have one, else
 * `intermediate_size`).
 */
export function probeShapeOf(model: ModelConfig, tokens: number): ProbeShape {
  const m = model as ModelConfig & { moe_intermediate_size?: number };
  const ffn = typeof m.moe_intermediate_size === "number" && m.moe_intermediate_size > 0 ? m.moe_intermediate_size : model.intermediate_size;
  return { tokens: Math.max(1, tokens), hidden: model.hidden_size, ffn: Math.max(1, ffn) };
}

/**
 * Create the training backend of `kind` (see the module comment) for the rank with index
 * `localRank` on this machine: with several GPUs, each rank takes its own (kernels/src/select.ts
 * `adapterIndexForRank`). The `local` transport runs all ranks on one host, so local rank = rank.
 * `probe` is the job's shape for `auto`'s speed probe ({@link probeShapeOf}; default: the built-in
 * job's). `tensorCores` (fp16 jobs: their loss scaling keeps gradients inside f16's range) asks a
 * webgpu backend for tensor-core matmuls where the library and GPU offer them (WebGpuBackendOptions
 * `tensorCores: "auto"`); the reason then says whether they are on.
 * @throws Error when `kind` is "webgpu" and no working WebGPU device exists (createBackend's
 * message, which says why).
 */
export async function selectTrainBackend(kind: BackendKind, localRank = 0, probe?: ProbeShape, tensorCores = false): Promise<TrainBackend> {
  const r = await createBackend(kind, { localRank, ...(probe ? { probe } : {}), ...(tensorCores ? { tensorCores: "auto" as const } : {}) });
  const status = (r.backend as { tensorCoresStatus?: string }).tensorCoresStatus;
  return tensorCores && status ? { ...r, reason: `${r.reason}; tensor cores ${status}` } : r;
}
