/**
 * The webgpu backend's `attentionCoopBlocks` option resolved against a device: the blocks of the
 * tensor-core attention kernels (wgsl/attention-coop.ts), checked for form and for the device's
 * workgroup limits.
 */
import type { WebGpuBackendOptions } from "./backend.ts";
import { COOP_ATTN_DEFAULT_BLOCKS, coopAttnBlockName, coopAttnBlockProblem, coopAttnBytes, type CoopAttnBlocks } from "../wgsl/attention-coop.ts";
import { COOP_SUBGROUP } from "../wgsl/matmul-coop-tile.ts";

/**
 * The blocks to use: `attentionCoopBlocks` over {@link COOP_ATTN_DEFAULT_BLOCKS}; null when none
 * of the defaults fits `device` (the backend then keeps the FMA attention kernels).
 * @throws Error naming the option: an unknown kernel key, a malformed block, a given block beyond
 *   the device's workgroup memory or invocations, or blocks given without `tensorCores`.
 */
export function resolveCoopAttnBlocks(device: GPUDevice, opts: Pick<WebGpuBackendOptions, "attentionCoopBlocks" | "tensorCores">): CoopAttnBlocks | null {
  const given = opts.attentionCoopBlocks ?? {};
  if (opts.attentionCoopBlocks && !opts.tensorCores) throw new Error(`webgpu: attentionCoopBlocks needs tensorCores (true, "auto" or "emulated"), got ${opts.tensorCores}`);
  const l = device.limits;
  const fits = (kind: keyof CoopAttnBlocks, b: CoopAttnBlocks[keyof CoopAttnBlocks]): boolean =>
    coopAttnBytes(kind, b) <= l.maxComputeWorkgroupStorageSize && b.sg * COOP_SUBGROUP <= Math.min(l.maxComputeInvocationsPerWorkgroup, l.maxComputeWorkgroupSizeX);
  const out = { ...COOP_ATTN_DEFAULT_BLOCKS };
  for (const key of Object.keys(given)) {
    if (key !== "fwd" && key !== "dq" && key !== "dkv") throw new Error(`webgpu: attentionCoopBlocks: unknown key ${key} (expected fwd, dq, dkv)`);
    const b = given[key]!;
    const why = coopAttnBlockProblem(key, b);
    if (why) throw new Error(`webgpu: attentionCoopBlocks.${key} ${coopAttnBlockName(b)}: ${why}`);
    if (!fits(key, b)) throw new Error(`webgpu: attentionCoopBlocks.${key} ${coopAttnBlockName(b)} needs ${coopAttnBytes(key, b)} bytes of workgroup memory and ${b.sg * COOP_SUBGROUP} invocations; the device has ${l.maxComputeWorkgroupStorageSize} and ${l.maxComputeInvocationsPerWorkgroup}`);
    out[key] = b;
  }
  return (["fwd", "dq", "dkv"] as const).every((k) => fits(k, out[k])) ? out : null;
}
