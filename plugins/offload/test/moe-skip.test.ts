/**
 * MoE-aware parameter offload: with `offload_param`, an f32 expert that no rank of its edp group
 * routed tokens to in a micro-batch is never copied host → device, all_gathered or prefetched, and
 * the parameters stay bit-identical to the run that fetches every expert and to the run without
 * offload (its zero gradient is still reduced and AdamW still updates it at the step). Router
 * skewed by a crafted gate (fixtures/skew-entry.ts): top-1, only two experts hot.
 * World 1, 2 and 4 with ep_size 1 (edp groups of world_size ranks agree through an all_reduce of the
 * counts) and ep_size 2; ZeRO-3 prefetch (stage3_prefetch_bucket_size) stays on, and in one run its
 * reuse (stage3_max_reuse_distance) too: ZeRO-3 never sees the skippable experts, so its trace is
 * the same on every rank (src/gather-window.ts). No idle expert is fetched or prefetched: the
 * experts the wrapper gathered are exactly the expert gathers (counted by a probe) minus the skipped
 * ones, i.e. one fetch per active use and none for an idle one. Also a
 * run where the two ranks of an edp group route to different experts (each rank sees only one of two
 * tokens, embedded on opposite sides of the hot gate direction): an expert idle on one rank but not
 * on the other is fetched by both, the experts idle on both are skipped.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { join } from "node:path";
import { launch } from "@zeromoe/core/launch";
import { tinyJob, tinyModel } from "@zeromoe/core/testing";
import type { SkewArgs, SkewOut } from "./fixtures/skew-entry.ts";

const ENTRY = join(import.meta.dirname, "fixtures", "skew-entry.ts");
const STEPS = 3;

function job(offload: boolean, ep: number, reuse = 0): Record<string, unknown> {
  return tinyJob({
    model: { ...tinyModel(), num_local_experts: ep === 2 ? 6 : 5, num_experts_per_tok: 1 },
    moe: { ep_size: ep },
    gradient_accumulation_steps: 2,
    gradient_clipping: 1.0,
    zero_optimization: {
      stage: 3, stage3_param_persistence_threshold: 0, stage3_prefetch_bucket_size: 2000, stage3_max_reuse_distance: reuse,
      ...(offload ? { offload_param: { device: "cpu" }, offload_optimizer: { device: "cpu" } } : {}),
    },
  });
}

type Offload = { moved_bytes: Record<string, number>; skip_idle_experts: boolean };

/** The wrapper's expert fetches = expert gathers − skipped ones (each skipped gather counts an
 * expert's shard bytes in param_h2d_skipped). */
function expectFetches(o: SkewOut, s: Offload): void {
  const idle = s.moved_bytes.param_h2d_skipped / o.expertShardBytes;
  expect(Number.isInteger(idle)).toBe(true);
  expect(o.gather!.expertFetches).toBeGreaterThan(0);
  expect(o.gather!.expertFetches).toBe(o.expertGathers - idle);
}

function expectSame(a: SkewOut, b: SkewOut): void {
  expect(a.losses).toEqual(b.losses);
  for (const [k, v] of Object.entries(b.params)) expect(a.params[k]).toEqual(v);
}

for (const [world, ep] of [[1, 1], [2, 1], [2, 2], [4, 1], [4, 2]] as const) {
  describe(`idle experts are not fetched, world ${world}, ep_size ${ep}`, () => {
    const run = (offload: boolean, skip: boolean, reuse = 0) =>
      launch<SkewOut>({ worldSize: world, entry: ENTRY, args: { job: job(offload, ep, reuse), steps: STEPS, skipIdleExperts: skip, hot: [1, 3] } satisfies SkewArgs });
    test("bit-identical to fetching every expert and to no offload, with ZeRO-3 prefetch and reuse on; one fetch per active expert use, none for an idle one", async () => {
      const [dev, all, skip, skipReuse] = [await run(false, true), await run(true, false), await run(true, true), await run(true, true, 1e9)];
      // rank 0 gathers every parameter, the idle experts' included (compared bit for bit below)
      expect(Object.keys(dev[0]!.params).filter((k) => k.includes(".experts.0.")).length).toBeGreaterThan(0);
      for (let r = 0; r < world; r++) {
        expectSame(skip[r]!, dev[r]!);
        expectSame(all[r]!, dev[r]!);
        expectSame(skipReuse[r]!, dev[r]!);
        const a = all[r]!.offload as Offload;
        const s = skip[r]!.offload as Offload;
        expect(a.skip_idle_experts).toBe(false);
        expect(s.skip_idle_experts).toBe(true);
        expect(a.moved_bytes.param_h2d_skipped).toBe(0);
        expect(s.moved_bytes.param_h2d_skipped).toBeGreaterThan(0);
        // the fetch-all run passes experts through ZeRO-3 and the prefetch window, whose device
        // residency between uses differs from the wrapper's (experts fetched per use), so its bytes
        // are a bound, not an identity; the exact check is the fetch count below
        expect(s.moved_bytes.param_h2d).toBeLessThanOrEqual(a.moved_bytes.param_h2d);
        // an idle expert is neither fetched nor prefetched: one fetch per active expert use, none else
        expectFetches(skip[r]!, s);
        expectFetches(skipReuse[r]!, skipReuse[r]!.offload as Offload);
        // ZeRO-3 kept its reuse with the skip on (fewer all_gathers with it)
        expect(skipReuse[r]!.gather!.fetches).toBeLessThan(skip[r]!.gather!.fetches);
        console.log(`world ${world} ep ${ep} rank ${r}: param_h2d per step ${a.moved_bytes.param_h2d / STEPS} B fetching every expert, ${s.moved_bytes.param_h2d / STEPS} B skipping idle experts (${s.moved_bytes.param_h2d_skipped / STEPS} B skipped); ZeRO-3 all_gathers ${skip[r]!.gather!.fetches} without reuse, ${skipReuse[r]!.gather!.fetches} with`);
      }
    }, 300_000);
  });
}

describe("the ranks of an edp group disagree on which experts got tokens (world 2, ep_size 1)", () => {
  test("each rank's local routing differs; the union is fetched, the rest skipped; bit-identical", async () => {
    const run = (offload: boolean, skip: boolean) =>
      launch<SkewOut>({ worldSize: 2, entry: ENTRY, args: { job: job(offload, 1), steps: STEPS, skipIdleExperts: skip, hot: [1, 3], split: [5, 17] } satisfies SkewArgs });
    const [dev, all, skip] = [await run(false, true), await run(true, false), await run(true, true)];
    const l0 = skip[0]!.localRows;
    const l1 = skip[1]!.localRows;
    // some expert got rows on exactly one of the two ranks
    const disagree = Object.keys(l0).filter((k) => (l0[k]! > 0) !== ((l1[k] ?? 0) > 0));
    expect(disagree.length).toBeGreaterThan(0);
    for (let r = 0; r < 2; r++) {
      expectSame(skip[r]!, dev[r]!);
      expectSame(all[r]!, dev[r]!);
      const a = all[r]!.offload as Offload;
      const s = skip[r]!.offload as Offload;
      expect(s.moved_bytes.param_h2d_skipped).toBeGreaterThan(0);
      expect(s.moved_bytes.param_h2d).toBeLessThanOrEqual(a.moved_bytes.param_h2d);
      expectFetches(skip[r]!, s);
    }
    console.log(`rows per expert in the first forward: rank 0 ${JSON.stringify(l0)}, rank 1 ${JSON.stringify(l1)}`);
  }, 300_000);
});
