/**
 * Parameter offload at ZeRO-3 (`offload_param` cpu/nvme, with `offload_optimizer` cpu/nvme) gives
 * the parameters, losses and gradient norms of the run without offload, bit for bit on the cpu
 * backend (the same all_gathers of the same shard values; the host AdamW equals the device's), at
 * world sizes 1, 2, 4, with MoE at ep_size 2 and with bf16. Between steps the device holds no
 * parameter and no optimizer bytes; the host holds the shards. With nvme, `max_in_cpu` and
 * `buffer_count` bound the host cache, and a shard over `buffer_size` is refused naming the key.
 */
import { afterAll, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch } from "@zeromoe/core/launch";
import { FIXTURE_ENTRY, tinyJob, type TrainOut } from "@zeromoe/core/testing";
import { expectTriplesEqual, MODES, parityCases, type Mode } from "./offload-parity.ts";

const STEPS = 3;
const root = mkdtempSync(join(tmpdir(), "offload-param-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function job(mode: Mode, over: Record<string, unknown> = {}, prefetch = 2000): Record<string, unknown> {
  const off = mode === "device" ? {} : {
    offload_param: { device: mode, ...(mode === "nvme" ? { nvme_path: join(root, "p"), max_in_cpu: 3000, buffer_count: 3, buffer_size: 10_000 } : {}) },
    offload_optimizer: { device: mode, ...(mode === "nvme" ? { nvme_path: join(root, "o") } : {}) },
  };
  return tinyJob({
    gradient_accumulation_steps: 2,
    gradient_clipping: 1.0,
    zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0, stage3_prefetch_bucket_size: prefetch, ...off },
    ...over,
  });
}

for (const world of [1, 2, 4]) {
  describe(`offload_param at ZeRO-3, world ${world}`, async () => {
    const runs = parityCases(world, "dense ep 1").flatMap((c) => MODES.map((m) => ({ label: `${c.label} ${m}`, job: job(m, c.over), steps: STEPS })));
    const outs = await launch<TrainOut[]>({ worldSize: world, entry: FIXTURE_ENTRY, args: { runs } });
    expectTriplesEqual(runs, outs, world, (dev, off) => {
      expect(off.owners.gather).toBe("zero3+offload");
      expect(dev.memory.current.param ?? 0).toBeGreaterThan(0);
      expect(off.memory.current.param ?? 0).toBe(0);
      expect(off.memory.peak.optim ?? 0).toBe(0);
    });
  });
}

test("a shard larger than offload_param.buffer_size is refused naming the key", async () => {
  const j = job("nvme");
  (j.zero_optimization as { offload_param: { buffer_size: number } }).offload_param.buffer_size = 100;
  await expect(launch<TrainOut>({ worldSize: 1, entry: FIXTURE_ENTRY, args: { job: j, steps: 1 } })).rejects.toThrow(/zero_optimization\.offload_param\.buffer_size: unit embed's parameter shard has \d+ elements, more than buffer_size 100/);
});
