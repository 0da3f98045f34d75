/**
 * The NVMe staging line a rank logs names the slots that rank really allocates. NvmeStaging
 * allocates max(1, min(floor(buffer_count / 3), units with NVMe states on this rank)) slots of three
 * f32 buffers of the longest such unit's state (src/nvme-state.ts); under expert parallelism a rank
 * holds only its own experts (1/ep_size of each layer's), and frozen units get no states, so the
 * model's unit count overstates it. Independent measures: the slots computed by hand from the units
 * this rank holds (engine.units(): optimizer device, state length), and the slots the host ledger
 * saw allocated (`host_bytes.optim` / (12 × longest length): NVMe states keep no host bytes of
 * their own). Every rank's captured log (ctx.log) must say that same number, exactly once.
 */
import { afterAll, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch } from "@zeromoe/core/launch";
import { tinyJob, tinyModel } from "@zeromoe/core/testing";
import type { StagingSlotsOut } from "./fixtures/staging-slots-entry.ts";

const ENTRY = join(import.meta.dirname, "fixtures", "staging-slots-entry.ts");
const nvmeRoot = mkdtempSync(join(tmpdir(), "offload-slots-"));
afterAll(() => rmSync(nvmeRoot, { recursive: true, force: true }));

function job(stage: number, bufferCount: number, over: Record<string, unknown> = {}, moe = true): Record<string, unknown> {
  return tinyJob({
    ...(moe ? { model: { ...tinyModel(), num_local_experts: 4 }, moe: { ep_size: 2 } } : {}),
    zero_optimization: { stage, stage3_param_persistence_threshold: 0, offload_optimizer: { device: "nvme", nvme_path: join(nvmeRoot, `s${stage}-b${bufferCount}`), buffer_count: bufferCount } },
    ...over,
  });
}

/** The slot count of the one log line that names NVMe staging slots. */
function loggedSlots(logs: string[]): number {
  const lines = logs.filter((l) => /staging slot/.test(l));
  expect(lines.length).toBe(1);
  const m = /(\d+) staging slots?\b/.exec(lines[0]!);
  expect(m).not.toBeNull();
  return Number(m![1]);
}

// tinyModel with 4 experts, 2 layers: 12 units (embed, 2 layers, 8 experts, head); at ep_size 2 a
// rank holds 8 of them (its 2 experts of each layer)
const cases: { label: string; world: number; job: Record<string, unknown>; bufferCount: number }[] = [
  { label: "ep_size 2, world 2, stage 2, buffer_count 27 (9 slots asked, 8 units here)", world: 2, job: job(2, 27), bufferCount: 27 },
  { label: "ep_size 2, world 4, stage 3, buffer_count 300", world: 4, job: job(3, 300), bufferCount: 300 },
  { label: "ep_size 2, world 2, stage 1, buffer_count 6 (2 slots: buffer-bound)", world: 2, job: job(1, 6), bufferCount: 6 },
  { label: "ep_size 2, world 2, stage 2, ratio 0.5 (units in model order)", world: 2, job: job(2, 30, { zero_optimization: { stage: 2, offload_optimizer: { device: "nvme", nvme_path: join(nvmeRoot, "ratio"), buffer_count: 30, ratio: 0.5 } } }), bufferCount: 30 },
  { label: "world 1, layer 0 frozen (its experts too), buffer_count 24", world: 1, job: job(1, 24, { freeze: ["model.layers.0"] }, false), bufferCount: 24 },
];

for (const c of cases) {
  test(c.label, async () => {
    const outs = await launch<StagingSlotsOut>({ worldSize: c.world, entry: ENTRY, args: { job: c.job, steps: 2 } });
    let belowModel = 0;
    for (const o of outs) {
      const nvme = o.units.filter((u) => u.device === "nvme");
      expect(nvme.length).toBeGreaterThan(0);
      const longest = Math.max(1, ...nvme.map((u) => u.length));
      const byHand = Math.max(1, Math.min(Math.floor(c.bufferCount / 3), nvme.length));
      const allocated = o.offload!.host_bytes.optim! / (12 * longest);
      expect(allocated).toBe(byHand);
      expect(loggedSlots(o.logs)).toBe(allocated);
      if (byHand < Math.floor(c.bufferCount / 3)) belowModel++;
    }
    if (c.bufferCount >= 24) expect(belowModel).toBe(c.world); // the case the model's unit count would overstate
  }, 300_000);
}
