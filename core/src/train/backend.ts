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

/** The environment variable that overrides the tensor-core choice of mixed-precision jobs. */
export const TENSOR_CORES_ENV = "ZEROMOE_TENSOR_CORES";

/**
 * Whether a job asks a webgpu backend for tensor-core matmuls (WebGpuBackendOptions
 * `tensorCores`): fp32 jobs never (their matmuls stay f32 on the FMA path); bf16 and fp16 jobs
 * "auto" (on where the library and GPU offer cooperative matrices: ZEROMOE_WGPU=coop on a GPU with
 * 16×16×16 f16→f32), since the coop matmul scales each operand by a power of two before rounding it
 * to f16 (kernels/src/wgsl/matmul-coop-scale.ts), which keeps bf16's unscaled gradients (~5e-7) and
 * large activations inside f16's range; the same switch puts attention on the tensor-core kernels
 * (kernels/src/wgsl/attention-coop.ts, head dims multiples of 16 up to 128, operands scaled alike).
 * `ZEROMOE_TENSOR_CORES` overrides it for bf16/fp16 jobs:
 * `auto` (default), `off` (FMA path), `on` (backend creation fails, naming why, where they are
 * unavailable).
 * @throws Error naming ZEROMOE_TENSOR_CORES and the accepted values on any other value.
 */
export function tensorCoresRequest(precision: { fp16: boolean; bf16: boolean }, env: Record<string, string | undefined> = process.env): boolean | "auto" {
  const raw = env[TENSOR_CORES_ENV];
  const v = raw === undefined || raw === "" ? "auto" : raw;
  if (v !== "auto" && v !== "on" && v !== "off") throw new Error(`${TENSOR_CORES_ENV}=${JSON.stringify(raw)}: expected auto, on or off`);
  if (!precision.fp16 && !precision.bf16) return false;
  return v === "auto" ? "auto" : v === "on";
}

/** The environment variable that lowers a webgpu backend's largest binding (WebGpuBackendOptions
 * `maxBindingBytes`), so that a whole run exercises tensors held in several bindings
 * (kernels/src/webgpu/buffers.ts) at small sizes. */
export const MAX_BINDING_BYTES_ENV = "ZEROMOE_MAX_BINDING_BYTES";

/**
 * The `maxBindingBytes` a webgpu training backend is created with: undefined (the device's limit)
 * unless {@link MAX_BINDING_BYTES_ENV} is set to an integer ≥ 16.
 * @throws Error naming the variable and what was expected on any other value.
 */
export function maxBindingBytesRequest(env: Record<string, string | undefined> = process.env): number | undefined {
  const raw = env[MAX_BINDING_BYTES_ENV];
  if (raw === undefined || raw === "") return undefined;
  const v = Number(raw);
  if (!(Number.isInteger(v) && v >= 16)) throw new Error(`${MAX_BINDING_BYTES_ENV}=${JSON.stringify(raw)}: expected an integer number of bytes ≥ 16`);
  return v;
}

/** The environment variable that times every kernel of a run on a webgpu backend (the backend's
 * `profile: true`, kernels/src/webgpu/profiler.ts): set to a file path, rank 0 writes there the GPU
 * time per kernel label of the steps after the first, as JSON (core/src/train/kernel-profile.ts).
 * Every dispatch then runs in its own timed compute pass, which slows the run. */
export const KERNEL_PROFILE_ENV = "ZEROMOE_PROFILE_KERNELS";

/** The path {@link KERNEL_PROFILE_ENV} names, or undefined when unset or empty. */
export function kernelProfileRequest(env: Record<string, string | undefined> = process.env): string | undefined {
  const v = env[KERNEL_PROFILE_ENV];
  return v === undefined || v === "" ? undefined : v;
}

/**
 * Create the training backend of `kind` (see the module comment) for the rank with index
 * `localRank` on this machine: with several GPUs, each rank takes its own (kernels/src/select.ts
 * `adapterIndexForRank`). The `local` transport runs all ranks on one host, so local rank = rank.
 * `probe` is the job's shape for `auto`'s speed probe ({@link probeShapeOf}; default: the built-in
 * job's). `tensorCores` ({@link tensorCoresRequest}: "auto" or true for bf16/fp16 jobs) asks a
 * webgpu backend for tensor-core matmuls (WebGpuBackendOptions `tensorCores`); the reason then says
 * whether they are on and why.
 * @throws Error when `kind` is "webgpu" and no working WebGPU device exists, or `tensorCores` is
 * true and they are unavailable (createBackend's message, which says why), or on a bad
 * {@link MAX_BINDING_BYTES_ENV}.
 */
export async function selectTrainBackend(kind: BackendKind, localRank = 0, probe?: ProbeShape, tensorCores: boolean | "auto" = false): Promise<TrainBackend> {
  const maxBindingBytes = maxBindingBytesRequest();
  const profile = kernelProfileRequest() !== undefined;
  const r = await createBackend(kind, { localRank, ...(probe ? { probe } : {}), ...(tensorCores ? { tensorCores } : {}), ...(maxBindingBytes !== undefined ? { maxBindingBytes } : {}), ...(profile ? { profile } : {}) });
  const status = (r.backend as { tensorCoresStatus?: string }).tensorCoresStatus;
  return tensorCores && status ? { ...r, reason: `${r.reason}; tensor cores ${status}` } : r;
}
