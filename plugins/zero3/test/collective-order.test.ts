/**
 * ZeRO-3 gathering issues its all_gathers in the same order on every rank, whatever order the device
 * reads of the shards complete in (plugins/zero3/src/gatherer.ts, "Collective order").
 *
 * Regression: on the WebGPU backend, prefetches started back to back could finish their shard reads
 * out of order, so ranks called all_gather for different units at the same position and the run
 * died with a CommMismatchError (`bun run train --config examples/zero3.json`, about one run in two
 * on lavapipe). Here one simulated rank reads in order (the reference) and another has reads that
 * complete in reverse order of issue; both must call all_gather for the same units in the same
 * order, with prefetch and the max-live eviction both active, and every gathered buffer must hold
 * its own unit's parameters. A second test shows the overlap the handles give: the all_gathers of
 * prefetched units are in flight while the current unit computes.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { CpuBackend, type Backend, type Buf, type HostArray, type View } from "@zeromoe/kernels";
import { makePlan, UnitState, type EngineEnv, type Unit } from "@zeromoe/core";
import { RecordingCommunicator, type CommEvent } from "@zeromoe/core/testing";
import { createGatherer } from "../src/gatherer.ts";

const SIZES = [1, 37, 211, 13, 97, 5, 149]; // awkward unit sizes (elements)
const STEPS = 3;

/** A deterministic pseudo-random value in [-1, 1) for (unit, element). */
function value(unit: number, i: number): number {
  const x = Math.sin(unit * 7919 + i * 104729 + 1) * 43758.5453;
  return 2 * (x - Math.floor(x)) - 1;
}

interface RankRun {
  /** `unit index:length` of every all_gather, in call order. */
  calls: string[];
  /** Whether every gather left the unit's own parameters in `unit.data`. */
  allCorrect: boolean;
  fetches: number;
  /** Most device reads pending at once (> 1: fetches overlapped). */
  maxPending: number;
  /** The communicator's events with a `compute u<i>` mark where each unit computes. */
  events: CommEvent[];
  /** Per compute (in order): the all_gathers in flight when it began. */
  inFlightAtCompute: number[][];
}

/**
 * Run STEPS steps of forward (units in order) and backward (reverse order) through the gatherer as
 * one rank of a world of 2. `readDelayMs(k)` is the delay of the k-th device read.
 */
async function runRank(readDelayMs: (k: number) => number, fail?: Error): Promise<RankRun> {
  const cpu = new CpuBackend();
  let reads = 0;
  let pending = 0;
  let maxPending = 0;
  const be = new Proxy(cpu, {
    get(target, prop, receiver) {
      if (prop === "read") {
        return (src: View, n: number): Promise<HostArray> => {
          const delay = readDelayMs(reads++);
          maxPending = Math.max(maxPending, ++pending);
          return new Promise((resolve, reject) =>
            setTimeout(() => {
              pending--;
              target.read(src, n).then(resolve, reject);
            }, delay),
          );
        };
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as Backend;
  // world of 2 with a mirrored peer: the gathered array is the shard twice (the other rank's half
  // lies beyond numel, not checked); collectives complete on a later macrotask
  const comm = new RecordingCommunicator({ worldSize: 2 });
  // a failure of the 12th all_gather: a prefetch in the second step
  if (fail) comm.failWhen((op, seq) => op === "all_gather" && seq === 11, fail);
  const group = comm.world;
  const unitOfShard = new Map<number, number>(); // shard length → unit index (lengths are distinct)
  const units: Unit[] = [];
  const states = new Map<Unit, UnitState>();
  SIZES.forEach((numel, idx) => {
    // a unit whose whole parameters fit in this rank's shard (shardSize = numel): the gathered
    // buffer's first numel elements are exactly this unit's values
    const u = { name: `u${idx}`, numel, dtype: "f32", data: null as Buf | null } as unknown as Unit;
    const plan = { ...makePlan(u, { ...group, size: 1, rank: 0 }, "sharded", "sharded", "sharded"), group };
    const st = new UnitState(u, plan);
    st.paramShard = be.alloc("f32", plan.shardSize, "param");
    be.write({ buf: st.paramShard, off: 0 }, Float32Array.from({ length: numel }, (_, i) => value(idx, i)));
    unitOfShard.set(plan.shardSize, idx);
    units.push(u);
    states.set(u, st);
  });
  const env = {
    be,
    comm,
    states,
    config: {
      zero_optimization: {
        stage3_prefetch_bucket_size: 400, // several units fetched ahead at once
        stage3_max_live_parameters: 260, // binds: kept units are evicted
        stage3_max_reuse_distance: 300,
      },
    },
  } as unknown as EngineEnv;
  const g = createGatherer();
  let allCorrect = true;
  const inFlightAtCompute: number[][] = [];
  const use = async (u: Unit, phase: "fwd" | "bwd") => {
    const h = states.get(u)!; // the unit's handle, as the engine passes it to the hooks
    await g.gather(h, phase, env);
    const idx = units.indexOf(u);
    comm.mark(`compute u${idx}`);
    inFlightAtCompute.push(comm.inFlight());
    const got = await cpu.read({ buf: h.params()!, off: 0 }, u.numel);
    for (let i = 0; i < u.numel; i++) if (Math.fround(value(idx, i)) !== got[i]) allCorrect = false;
    await g.release(h, phase, env);
  };
  for (let step = 0; step < STEPS; step++) {
    for (const u of units) await use(u, "fwd");
    for (const u of [...units].reverse()) await use(u, "bwd");
    await g.endStep!(env);
  }
  // the order of all_gathers is the order they started (= issued: the frame starts in issue order)
  const calls = comm.events.filter((e) => e.what === "start" && e.op === "all_gather").map((e) => `${unitOfShard.get(e.length)}:${e.length}@${e.label}`);
  return { calls, allCorrect, fetches: g.stats().fetches, maxPending, events: comm.events, inFlightAtCompute };
}

describe("zero3 gatherer: collective order", () => {
  test("reads completing in reverse order give the same all_gather sequence as in-order reads", async () => {
    const inOrder = await runRank(() => 0);
    const reversed = await runRank((k) => 3 * (7 - (k % 8))); // later reads of a burst land first
    expect(inOrder.allCorrect).toBe(true);
    expect(reversed.allCorrect).toBe(true);
    // prefetches are issued and left in flight, so several shard reads were pending at once, yet
    // the all_gathers kept one order (fixed at issue); eviction really happened: units were fetched
    // again within a step (more than one fetch per unit per step)
    expect(reversed.maxPending).toBeGreaterThan(1);
    expect(inOrder.fetches).toBeGreaterThan(SIZES.length * STEPS);
    expect(inOrder.calls.length).toBe(inOrder.fetches);
    expect(reversed.calls).toEqual(inOrder.calls);
  }, 300_000);

  test("overlap: a prefetched unit's all_gather is issued before the current unit computes and is still in flight while it does", async () => {
    const run = await runRank(() => 0);
    // after the first step (the order of use is being recorded then: no prefetch), computes begin
    // with all_gathers in flight that were issued by an earlier gather call and not waited
    const computes = run.events.filter((e) => e.what === "mark");
    const withInFlight = run.inFlightAtCompute.filter((f) => f.length > 0).length;
    expect(computes.length).toBe(2 * SIZES.length * STEPS);
    expect(withInFlight).toBeGreaterThan(0);
    // for one such compute: the in-flight all_gather was issued before the mark, completes after it
    const i = run.inFlightAtCompute.findIndex((f) => f.length > 0);
    const seq = run.inFlightAtCompute[i]![0]!;
    const markAt = run.events.indexOf(computes[i]!);
    const issuedAt = run.events.findIndex((e) => e.what === "issue" && e.seq === seq);
    const doneAt = run.events.findIndex((e) => e.what === "complete" && e.seq === seq);
    expect(issuedAt).toBeLessThan(markAt);
    expect(doneAt).toBeGreaterThan(markAt);
    // and the first step, with nothing to prefetch, never computed with a gather in flight
    expect(run.inFlightAtCompute.slice(0, 2 * SIZES.length).every((f) => f.length === 0)).toBe(true);
  }, 300_000);

  test("a failed all_gather (a prefetch) rejects the gather of its unit with the transport's error", async () => {
    const boom = new Error("all_gather on group world (rank 0): simulated transport failure");
    await expect(runRank(() => 0, boom)).rejects.toBe(boom);
  }, 300_000);
});
