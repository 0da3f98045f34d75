/**
 * The offload plugin's share of the up-front memory estimate (core/src/train/memory-estimate.ts):
 * after the ZeRO stage has partitioned a part, the optimizer states of the offloaded fraction
 * (`offload_optimizer.ratio`, 1 by default) leave the device — `optim` drops by that fraction and
 * the bytes move to `host` (host memory for "cpu"; NVMe files for "nvme" hold them, with only
 * staging buffers in host memory, not counted here). With `offload_param` at stage 3 the sharded
 * parameters leave the device likewise; the parameters ZeRO-3 keeps whole (units under
 * `stage3_param_persistence_threshold`, the part's `wholeParams`) stay on it, as DeepSpeed keeps
 * them.
 */
import type { PluginMemory } from "@zeromoe/core/plugin";
import { offloadOptions, offloadThreadsFromEnv } from "./options.ts";

/** Memory contribution (see the module comment). */
export const offloadMemory: PluginMemory = {
  partition(part, input) {
    // the up-front memory check runs before any data is loaded: refuse offload settings that
    // cannot run here already (ConfigError naming the key: exit 2), not after loading the data
    offloadOptions(input.config);
    offloadThreadsFromEnv(); // a bad ZEROMOE_OFFLOAD_THREADS is refused before launch too
    const z = input.config.zero_optimization;
    const oo = z.offload_optimizer;
    const op = z.offload_param;
    let out = part;
    if (oo.device !== "none") {
      const moved = part.optim * oo.ratio;
      out = { ...out, optim: out.optim - moved, host: (out.host ?? 0) + (oo.device === "cpu" ? moved : 0) };
    }
    if (op.device !== "none" && z.stage === 3) {
      // sharded parameters leave the device; the persistent small units' whole parameters stay
      // (the prefetch window comes on top, like ZeRO-3's gathered parameters)
      const stay = Math.min(out.params, out.wholeParams ?? 0);
      const moved = out.params - stay;
      out = { ...out, params: stay, host: (out.host ?? 0) + (op.device === "cpu" ? moved : 0) };
    }
    return out;
  },
};
