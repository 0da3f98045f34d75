/**
 * `reduce_bucket_size` is a bound (issue 17): one reduce_scatter never sends more elements than it,
 * except a bucket holding a single unit that is larger than the bound by itself. Before the fix the
 * reducer added a unit and then flushed, so a bucket of 3000 sent 5184 elements.
 *
 * The reducer runs here against a recording communicator (group of 3 ranks) on the CPU backend, with
 * unit sizes chosen so that "add, then flush" overshoots; every bucket size is checked.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { CpuBackend } from "@zeromoe/kernels";
import type { HookContext, UnitHandle } from "@zeromoe/core/plugin";
import { RecordingCommunicator } from "@zeromoe/core/testing";
import { createBucketedReducer } from "../src/bucketed-reducer.ts";

/** One rank of a world of 3 (mirrored peers); collectives complete on a later macrotask. */
function newComm(): RecordingCommunicator {
  return new RecordingCommunicator({ worldSize: 3 });
}
// awkward sizes (primes and non-multiples of 3): padded lengths 3·ceil(n/3)
const NUMELS = [1297, 7, 2999, 3001, 11, 4093, 5, 1024, 3];
const padded = (n: number): number => 3 * Math.ceil(n / 3);

/** Run one micro-batch of NUMELS through the reducer with `bound`; the reduce_scatter send sizes. */
async function sends(bound: number, overlap = false): Promise<number[]> {
  const be = new CpuBackend();
  const comm = newComm();
  const GROUP = comm.world;
  const ctx = { be, comm, config: { zero_optimization: { reduce_bucket_size: bound, overlap_comm: overlap } } } as unknown as HookContext;
  const units: UnitHandle[] = NUMELS.map((numel, i) => {
    const shardSize = Math.ceil(numel / 3);
    const acc = be.alloc("f32", shardSize, "grad");
    let grad: ReturnType<typeof be.alloc> | null = be.alloc("f32", numel, "grad");
    be.write({ buf: grad, off: 0 }, Float32Array.from({ length: numel }, (_, j) => Math.sin(i * 7919 + j)));
    return {
      name: `u${i}`, kind: "layer", numel, dtype: "f32", group: GROUP,
      plan: { group: GROUP, params: "replicated", grads: "sharded", optim: "sharded", numel, shardSize, shardStart: 0, owned: shardSize },
      microGrad: () => grad,
      releaseMicroGrad: () => { if (grad) be.free(grad); grad = null; },
      gradAccumulator: () => acc,
    } as unknown as UnitHandle;
  });
  const r = createBucketedReducer();
  for (const u of units) await r.gradReady(u, ctx);
  await r.finish(ctx);
  expect(comm.inFlight()).toEqual([]);
  return comm.events.filter((e) => e.what === "start" && e.op === "reduce_scatter").map((e) => e.length);
}

describe("reduce_bucket_size is a bound", () => {
  for (const bound of [1, 1000, 3000, 3003, 4096, 6000, 9000, 200000]) {
    test(`bound ${bound}: no bucket exceeds it except a single larger unit`, async () => {
      const s = await sends(bound);
      // every unit is sent exactly once
      expect(s.reduce((a, b) => a + b, 0)).toBe(NUMELS.reduce((a, n) => a + padded(n), 0));
      // greedy in order: reconstruct the buckets and check each against the bound
      let i = 0;
      for (const len of s) {
        let got = 0;
        let count = 0;
        while (got < len) got += padded(NUMELS[i++]!), count++;
        expect(got).toBe(len);
        if (len > bound) expect(count).toBe(1);
      }
      expect(i).toBe(NUMELS.length);
    });
  }

  test("3000: the old reducer's overshoot (a bucket of 3000 sending more) is gone", async () => {
    const s = await sends(3000);
    for (const len of s) if (len > 3000) expect([padded(3001), padded(4093)]).toContain(len);
  });

  test("overlap_comm sends the same buckets", async () => {
    for (const bound of [1, 3000, 9000]) expect(await sends(bound, true)).toEqual(await sends(bound, false));
  });

  test("a large bound sends everything in one reduce_scatter", async () => {
    expect(await sends(200000)).toEqual([NUMELS.reduce((a, n) => a + padded(n), 0)]);
  });
});
