/**
 * MoE-aware parameter offload: with `offload_param`, an f32 expert that no rank of its edp group
 * routed tokens to in a micro-batch is never copied host → device (nor all_gathered), and the
 * parameters stay bit-identical to the run that fetches every expert and to the run without
 * offload (its zero gradient is still reduced and AdamW still updates it at the step). Router
 * skewed by a crafted gate (fixtures/skew-entry.ts): 5 experts, top-1, only experts 1 and 3 hot.
 * World 1, world 2 with ep_size 1 (edp group of 2: the ranks agree through an all_reduce of the
 * counts) and world 2 with ep_size 2 (edp groups of 1).
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { launch } from "@zeromoe/core/launch";
import { tinyJob, tinyModel } from "@zeromoe/core/testing";
import type { SkewOut } from "./fixtures/skew-entry.ts";

const ENTRY = join(import.meta.dir, "fixtures", "skew-entry.ts");
const STEPS = 3;

function job(offload: boolean, ep: number): Record<string, unknown> {
  return tinyJob({
    model: { ...tinyModel(), num_local_experts: ep === 2 ? 6 : 5, num_experts_per_tok: 1 },
    moe: { ep_size: ep },
    gradient_accumulation_steps: 2,
    gradient_clipping: 1.0,
    zero_optimization: {
      stage: 3, stage3_param_persistence_threshold: 0, stage3_prefetch_bucket_size: 2000,
      ...(offload ? { offload_param: { device: "cpu" }, offload_optimizer: { device: "cpu" } } : {}),
    },
  });
}

for (const [world, ep] of [[1, 1], [2, 1], [2, 2]] as const) {
  describe(`idle experts are not fetched, world ${world}, ep_size ${ep}`, () => {
    const run = async (offload: boolean, skip: boolean) =>
      launch<SkewOut>({ worldSize: world, entry: ENTRY, args: { job: job(offload, ep), steps: STEPS, skipIdleExperts: skip, hot: [1, 3] } });
    test("bit-identical to fetching every expert and to no offload; fewer bytes moved", async () => {
      const [dev, all, skip] = [await run(false, true), await run(true, false), await run(true, true)];
      // rank 0 gathers every parameter, the idle experts' included (compared bit for bit below)
      expect(Object.keys(dev[0]!.params).filter((k) => k.includes(".experts.0.")).length).toBeGreaterThan(0);
      for (let r = 0; r < world; r++) {
        expect(skip[r]!.losses).toEqual(dev[r]!.losses);
        expect(all[r]!.losses).toEqual(dev[r]!.losses);
        for (const [k, v] of Object.entries(dev[r]!.params)) {
          expect(skip[r]!.params[k]).toEqual(v);
          expect(all[r]!.params[k]).toEqual(v);
        }
        const a = all[r]!.offload as { moved_bytes: Record<string, number>; skip_idle_experts: boolean };
        const s = skip[r]!.offload as { moved_bytes: Record<string, number>; skip_idle_experts: boolean; param_h2d_bytes_per_step: number };
        expect(a.skip_idle_experts).toBe(false);
        expect(s.skip_idle_experts).toBe(true);
        expect(a.moved_bytes.param_h2d_skipped).toBe(0);
        expect(s.moved_bytes.param_h2d_skipped).toBeGreaterThan(0);
        expect(s.moved_bytes.param_h2d).toBeLessThan(a.moved_bytes.param_h2d);
        console.log(`world ${world} ep ${ep} rank ${r}: param_h2d per step ${a.moved_bytes.param_h2d / STEPS} B fetching every expert, ${s.moved_bytes.param_h2d / STEPS} B skipping idle experts (${s.moved_bytes.param_h2d_skipped / STEPS} B skipped)`);
      }
    }, 300_000);
  });
}
