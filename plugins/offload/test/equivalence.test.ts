/**
 * Optimizer offload to host memory and to NVMe files reproduces the device optimizer bit for bit
 * on the cpu backend: the host AdamW is the cpu backend's fused kernel operation for operation
 * (src/host-adamw.ts), the gradients and the clipping coefficient are the engine's, splitting a unit
 * over threads does not change an elementwise update, and NVMe round trips are exact. So for every
 * world size (1, 2, 4), ZeRO stage (1, 2, 3), with MoE at ep_size 2, and with bf16, the parameters,
 * losses and gradient norms after 3 steps equal the run without offload exactly; the device holds no
 * `optim` bytes. The NVMe runs also vary every `aio` key and buffer_count (1 or 2 staging slots).
 */
import { afterAll, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch } from "@zeromoe/core/launch";
import { FIXTURE_ENTRY, tinyJob, type TrainOut } from "@zeromoe/core/testing";
import { expectTriplesEqual, MODES, parityCases, type Mode } from "./offload-parity.ts";

const STEPS = 3;
const nvmeRoot = mkdtempSync(join(tmpdir(), "offload-eq-"));
afterAll(() => rmSync(nvmeRoot, { recursive: true, force: true }));

function job(stage: number, mode: Mode, over: Record<string, unknown> = {}, nvme: Record<string, unknown> = {}): Record<string, unknown> {
  const oo = mode === "device" ? {} : { offload_optimizer: { device: mode, ...(mode === "nvme" ? { nvme_path: join(nvmeRoot, "states"), ...nvme } : {}) } };
  return tinyJob({
    gradient_accumulation_steps: 2,
    gradient_clipping: 1.0,
    zero_optimization: { stage, stage3_param_persistence_threshold: 0, ...oo },
    ...over,
  });
}

// aio / buffer_count variants, cycled over the nvme runs
const AIO: Record<string, unknown>[] = [
  {},
  { aio: { block_size: 4096, queue_depth: 2, thread_count: 2, single_submit: true, overlap_events: false }, buffer_count: 6 },
  { aio: { block_size: 8192, queue_depth: 3, thread_count: 3, single_submit: false, overlap_events: true }, buffer_count: 3, fast_init: true },
];

for (const world of [1, 2, 4]) {
  describe(`optimizer offload (cpu, nvme), world ${world}`, async () => {
    const runs: { label: string; job: Record<string, unknown>; steps: number }[] = [];
    let k = 0;
    for (const c of parityCases(world, "dense ep 1")) for (const stage of [1, 2, 3]) {
      const v = AIO[k++ % AIO.length]!;
      const { aio, ...nv } = v as { aio?: Record<string, unknown> };
      const over = aio ? { ...c.over, aio } : c.over;
      for (const mode of MODES) runs.push({ label: `${c.label} stage ${stage} ${mode}${mode === "nvme" ? ` ${JSON.stringify(v)}` : ""}`, job: job(stage, mode, over, nv), steps: STEPS });
    }
    const outs = await launch<TrainOut[]>({ worldSize: world, entry: FIXTURE_ENTRY, args: { runs } });
    expectTriplesEqual(runs, outs, world, (dev, off) => {
      expect(off.owners.offload).toBe("offload");
      expect(dev.memory.current.optim ?? 0).toBeGreaterThan(0);
      expect(off.memory.peak.optim ?? 0).toBe(0);
    });
    test("nvme files are removed when the engine is destroyed", () => {
      let left: string[] = [];
      try {
        left = readdirSync(join(nvmeRoot, "states"));
      } catch {
        left = [];
      }
      expect(left).toEqual([]);
    });
  });
}
