/**
 * `offload_param` without `offload_optimizer` (DeepSpeed accepts it: offload_param is "valid only
 * with stage 3", deepspeed/runtime/zero/offload_config.py; the optimizer then stays on the device):
 * each sharded parameter shard lives on the host (or in a file), is copied to the device within
 * the prefetch window for forward/backward, and for the device AdamW's update, and written back
 * right after it (core/src/engine/optimizer.ts). Bit-identical to device ZeRO-3 on the cpu backend
 * (same AdamW kernel on the same values) at world sizes 1, 2, 4, with MoE at ep_size 2 and with
 * bf16; between steps the device holds no parameter bytes but keeps its optimizer states.
 */
import { afterAll, describe, expect } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch } from "@zeromoe/core/launch";
import { FIXTURE_ENTRY, tinyJob, type TrainOut } from "@zeromoe/core/testing";
import { expectTriplesEqual, MODES, parityCases, type Mode } from "./offload-parity.ts";

const STEPS = 3;
const root = mkdtempSync(join(tmpdir(), "offload-param-only-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function job(mode: Mode, over: Record<string, unknown> = {}): Record<string, unknown> {
  const off = mode === "device" ? {} : { offload_param: { device: mode, ...(mode === "nvme" ? { nvme_path: join(root, "p"), max_in_cpu: 2000, buffer_count: 2 } : {}) } };
  return tinyJob({
    gradient_accumulation_steps: 2,
    gradient_clipping: 1.0,
    zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0, stage3_prefetch_bucket_size: 1500, ...off },
    ...over,
  });
}

for (const world of [1, 2, 4]) {
  describe(`offload_param without offload_optimizer, world ${world}`, async () => {
    const runs = parityCases(world).flatMap((c) => MODES.map((m) => ({ label: `${c.label} ${m}`, job: job(m, c.over), steps: STEPS })));
    const outs = await launch<TrainOut[]>({ worldSize: world, entry: FIXTURE_ENTRY, args: { runs } });
    expectTriplesEqual(runs, outs, world, (dev, off) => {
      expect(off.owners.offload).toBe("offload");
      expect(dev.memory.current.param ?? 0).toBeGreaterThan(0);
      expect(off.memory.current.param ?? 0).toBe(0);
      // the optimizer stayed on the device
      expect(off.memory.current.optim ?? 0).toBe(dev.memory.current.optim ?? 0);
      expect(off.memory.current.optim ?? 0).toBeGreaterThan(0);
    });
  });
}
