/**
 * `overlap_comm` on the bucketed reducer (plugins/zero2/src/bucketed-reducer.ts), against a
 * recording communicator (one rank of 3, mirrored peers, collectives completing on a later
 * macrotask): with overlap a bucket's reduce_scatter is in flight while the backward pass hands the
 * next units' gradients over (shown by the order of events, never by time); the summed gradient
 * shards are the same bits with and without overlap over two micro-batches; a failed bucket's
 * error reaches the caller (at `finish` with overlap, where the bucket is issued without).
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { CpuBackend } from "@zeromoe/kernels";
import type { HookContext, UnitHandle } from "@zeromoe/core/plugin";
import { RecordingCommunicator } from "@zeromoe/core/testing";
import { createBucketedReducer } from "../src/bucketed-reducer.ts";

const NUMELS = [1297, 7, 2999, 3001, 11, 4093, 5, 1024, 3]; // awkward sizes, not multiples of 3
const MICRO = 2;

interface Run {
  comm: RecordingCommunicator;
  /** Per unit, the summed gradient shard after the step. */
  shards: number[][];
  /** Per gradReady call: the reduce_scatters in flight when it began. */
  inFlightAtGradReady: number[][];
}

async function run(overlap: boolean, fail?: Error): Promise<Run> {
  const be = new CpuBackend();
  const comm = new RecordingCommunicator({ worldSize: 3 });
  if (fail) comm.failWhen((op, seq) => op === "reduce_scatter" && seq === 1, fail);
  const group = comm.world;
  let micro = 0;
  const accs = NUMELS.map((numel) => be.alloc("f32", Math.ceil(numel / 3), "grad"));
  const units: UnitHandle[] = NUMELS.map((numel, i) => {
    const shardSize = Math.ceil(numel / 3);
    return {
      name: `u${i}`, kind: "layer", numel, dtype: "f32", group,
      plan: { group, params: "replicated", grads: "sharded", optim: "sharded", numel, shardSize, shardStart: 0, owned: shardSize },
      microGrad: () => {
        const g = be.alloc("f32", numel, "grad");
        be.write({ buf: g, off: 0 }, Float32Array.from({ length: numel }, (_, j) => Math.sin(i * 7919 + j * 31 + micro * 104729) * 1.37));
        return g;
      },
      releaseMicroGrad: () => {},
      gradAccumulator: () => accs[i]!,
    } as unknown as UnitHandle;
  });
  const ctx = { be, comm, config: { zero_optimization: { reduce_bucket_size: 4000, overlap_comm: overlap } } } as unknown as HookContext;
  const r = createBucketedReducer();
  const inFlightAtGradReady: number[][] = [];
  for (micro = 0; micro < MICRO; micro++) {
    for (const u of [...units].reverse()) {
      comm.mark(`backward ${u.name}`);
      inFlightAtGradReady.push(comm.inFlight());
      await r.gradReady(u, ctx);
    }
  }
  await r.finish(ctx);
  const shards = await Promise.all(accs.map(async (b, i) => Array.from(await be.read({ buf: b, off: 0 }, Math.ceil(NUMELS[i]! / 3)))));
  return { comm, shards, inFlightAtGradReady };
}

describe("zero2 bucketed reducer: overlap_comm", () => {
  test("with overlap, a bucket's reduce_scatter is in flight while backward hands over the next gradients; without, never", async () => {
    const on = await run(true);
    const off = await run(false);
    expect(on.inFlightAtGradReady.some((f) => f.length > 0)).toBe(true);
    expect(off.inFlightAtGradReady.every((f) => f.length === 0)).toBe(true);
    // every bucket was issued before the step's end and nothing is left in flight after finish
    expect(on.comm.inFlight()).toEqual([]);
    const issues = (c: RecordingCommunicator) => c.events.filter((e) => e.what === "start").map((e) => e.length);
    expect(issues(on.comm)).toEqual(issues(off.comm));
    expect(issues(on.comm).length).toBeGreaterThan(2 * MICRO);
  });

  test("the summed gradient shards are the same bits with and without overlap (two micro-batches)", async () => {
    const on = await run(true);
    const off = await run(false);
    expect(on.shards).toEqual(off.shards);
    // the mirrored peers make every shard 3 × (sum over micro-batches) of this rank's part: non-zero
    expect(on.shards.flat().some((x) => x !== 0)).toBe(true);
  });

  test("a failed bucket's error reaches the caller: at finish with overlap, at the flush without", async () => {
    const boom = new Error("reduce_scatter on group world (rank 0): simulated transport failure");
    await expect(run(true, boom)).rejects.toBe(boom);
    await expect(run(false, boom)).rejects.toBe(boom);
  });
});
