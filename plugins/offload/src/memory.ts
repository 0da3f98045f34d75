/**
 * The offload plugin's share of the up-front memory estimate (core/src/train/memory-estimate.ts):
 * after the ZeRO stage has partitioned a part, the optimizer states of the offloaded fraction
 * (`offload_optimizer.ratio`, 1 by default) leave the device — `optim` drops by that fraction and
 * the bytes move to `host` (host memory for "cpu"; NVMe files for "nvme" hold them, with only
 * staging buffers in host memory, not counted here).
 */
import type { PluginMemory } from "@zeromoe/core/plugin";

/** Memory contribution (see the module comment). */
export const offloadMemory: PluginMemory = {
  partition(part, input) {
    const oo = input.config.zero_optimization.offload_optimizer;
    if (oo.device === "none") return part;
    const moved = part.optim * oo.ratio;
    return { ...part, optim: part.optim - moved, host: (part.host ?? 0) + (oo.device === "cpu" ? moved : 0) };
  },
};
