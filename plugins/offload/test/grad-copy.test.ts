/**
 * Gradient copy-out overlapped with backward (ZeRO-Offload, USENIX ATC'21 §4.2; src/grad-copy.ts):
 * with optimizer offload, every trainable unit gets exactly one `gradReduced` event per step, while
 * the last micro-batch's backward is still running (the ZeRO stage's reduction helpers announce the
 * unit as its reduction completes: ZeRO-1's reduce_scatter, ZeRO-2/3's bucket flush), before
 * `reduce.finish` and the offload `step`; the copy starts then. Parameters and losses equal the
 * comparison run that copies at the optimizer step (`overlapGradCopy: false`) and the run without
 * offload, bit for bit, at world sizes 1, 2 and 4, stages 1–3, dense and MoE at ep_size 2.
 * With small buckets (reduce_bucket_size 3000) every event comes during backward; with the default
 * (one bucket per group) a bucket flushed in the last micro-batch still holds the same unit's entry
 * of micro-batch 0, so only the last micro-batch's entry may announce it (core's PendingGrad
 * `lastMicro`) — the rest are announced inside `reduce.finish`, still before the step.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { join } from "node:path";
import { launch } from "@zeromoe/core/launch";
import { tinyJob, tinyModel } from "@zeromoe/core/testing";
import type { GradCopyOut } from "./fixtures/grad-copy-entry.ts";

const ENTRY = join(import.meta.dirname, "fixtures", "grad-copy-entry.ts");
const STEPS = 2;
const ACCUM = 3;

function job(stage: number, offload: boolean, moe: boolean, small: boolean): Record<string, unknown> {
  return tinyJob({
    ...(moe ? { model: { ...tinyModel(), num_local_experts: 4 }, moe: { ep_size: 2 } } : {}),
    gradient_accumulation_steps: ACCUM,
    gradient_clipping: 1.0,
    zero_optimization: { stage, stage3_param_persistence_threshold: 0, ...(small ? { reduce_bucket_size: 3000 } : {}), ...(offload ? { offload_optimizer: { device: "cpu" } } : {}) },
  });
}

const cases: [number, number, boolean, boolean][] = [];
for (const world of [1, 2, 4]) for (const stage of [1, 2, 3]) cases.push([world, stage, false, true]);
for (const world of [2, 4]) cases.push([world, 3, true, true]);
cases.push([2, 2, false, false], [4, 3, false, false], [2, 3, true, false]);

for (const [world, stage, moe, small] of cases) {
  describe(`world ${world}, stage ${stage}${moe ? ", MoE ep_size 2" : ""}, ${small ? "reduce_bucket_size 3000" : "default buckets"}`, () => {
    test("one gradReduced per unit per step during the last backward; bit-identical to copying at the step and to no offload", async () => {
      const run = (offload: boolean, overlap: boolean) => launch<GradCopyOut>({ worldSize: world, entry: ENTRY, args: { job: job(stage, offload, moe, small), steps: STEPS, overlapGradCopy: overlap } });
      const [dev, atStep, overlapped] = [await run(false, true), await run(true, false), await run(true, true)];
      for (let r = 0; r < world; r++) {
        const o = overlapped[r]!;
        expect(o.offloaded.length).toBeGreaterThan(0);
        for (const ev of o.events) {
          const fin = ev.indexOf("finish");
          const reduced = ev.filter((e) => e.startsWith("reduced "));
          // every trainable unit exactly once, all during the last micro-batch's backward, before finish
          expect(reduced.map((e) => e.split(" ")[1]).sort()).toEqual([...o.trainable].sort());
          if (small || stage === 1) expect(reduced.every((e) => e.endsWith(` bwd ${ACCUM - 1}`))).toBe(true);
          else expect(reduced.every((e) => e.endsWith(` ${ACCUM - 1}`))).toBe(true);
          expect(reduced.filter((e) => e.includes(" bwd ")).length).toBeGreaterThan(0);
          expect(ev.lastIndexOf(reduced.at(-1)!)).toBeLessThan(fin);
          expect(ev.indexOf(`step ${o.offloaded.length}`)).toBeGreaterThan(fin);
        }
        const so = o.offload as { grad_copy: string; host_bytes: Record<string, number>; moved_bytes: Record<string, number> };
        const sa = atStep[r]!.offload as typeof so;
        expect(so.grad_copy).toBe("overlapped with backward");
        expect(sa.grad_copy).toBe("at the optimizer step");
        expect(so.host_bytes.grad).toBeGreaterThan(0);
        expect(sa.host_bytes.grad).toBe(0);
        expect(so.moved_bytes.grad_d2h).toBe(sa.moved_bytes.grad_d2h);
        expect(o.losses).toEqual(dev[r]!.losses);
        expect(atStep[r]!.losses).toEqual(dev[r]!.losses);
        for (const [k, v] of Object.entries(dev[r]!.params)) {
          expect(o.params[k]).toEqual(v);
          expect(atStep[r]!.params[k]).toEqual(v);
        }
      }
    }, 300_000);
  });
}
