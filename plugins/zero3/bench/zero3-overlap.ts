/**
 * `bun run bench zero3-overlap [--units N] [--compute-ms C] [--comm-ms D] [--steps S]`: what the
 * handle contract buys ZeRO-3. The gatherer (plugins/zero3/src/gatherer.ts) runs S steps of forward
 * and backward over N units of one rank of a world of 2 whose collectives take D ms of simulated
 * wire time each (a RecordingCommunicator with `delayMs`, @zeromoe/core/testing), while each unit's
 * compute is C ms of busy work on the rank's thread. Without prefetch every all_gather is waited
 * before its unit computes, so a unit costs about C + D; with the prefetch window the next unit's
 * all_gather is in flight during the current compute, so a unit costs about max(C, D). Printed:
 * ms per step both ways, the sum and max models, and the ratio. The first step records the order of
 * use (no prefetch), so steps after it are timed.
 */
import { CpuBackend } from "@zeromoe/kernels";
import { makePlan, UnitState, type EngineEnv, type Unit } from "@zeromoe/core";
import { RecordingCommunicator } from "@zeromoe/core/testing";
import { createGatherer } from "../src/gatherer.ts";

function flag(args: string[], name: string, dflt: number): number {
  const i = args.indexOf(name);
  if (i < 0) return dflt;
  const v = Number(args[i + 1]);
  if (!Number.isFinite(v) || v < 0) {
    console.error(`zero3-overlap: ${name} needs a number ≥ 0, got ${args[i + 1]}`);
    process.exit(2);
  }
  return v;
}

/** Busy work on this thread for `ms` milliseconds (the unit's compute). */
function compute(ms: number): void {
  const end = performance.now() + ms;
  let x = 0;
  while (performance.now() < end) x += Math.sqrt(x + 1);
  if (x < 0) console.log(x);
}

async function stepMs(o: { units: number; computeMs: number; commMs: number; steps: number; prefetch: boolean }): Promise<number> {
  const be = new CpuBackend();
  const comm = new RecordingCommunicator({ worldSize: 2, delayMs: o.commMs });
  const numel = 4099;
  const units: Unit[] = [];
  const states = new Map<Unit, UnitState>();
  for (let k = 0; k < o.units; k++) {
    const u = { name: `u${k}`, numel, dtype: "f32", data: null } as unknown as Unit;
    const plan = makePlan(u, comm.world, "sharded", "sharded", "sharded");
    const st = new UnitState(u, plan);
    st.paramShard = be.alloc("f32", plan.shardSize, "param");
    units.push(u);
    states.set(u, st);
  }
  const env = {
    be,
    comm,
    states,
    config: { zero_optimization: { stage3_prefetch_bucket_size: o.prefetch ? numel : 0, stage3_max_live_parameters: 1e9, stage3_max_reuse_distance: 0 } },
  } as unknown as EngineEnv;
  const g = createGatherer();
  const use = async (u: Unit, phase: "fwd" | "bwd") => {
    const h = states.get(u)!;
    await g.gather(h, phase, env);
    compute(o.computeMs);
    await g.release(h, phase, env);
  };
  let t0 = 0;
  for (let s = 0; s < o.steps + 1; s++) {
    if (s === 1) t0 = performance.now();
    for (const u of units) await use(u, "fwd");
    for (const u of [...units].reverse()) await use(u, "bwd");
    await g.endStep!(env);
  }
  return (performance.now() - t0) / o.steps;
}

export async function main(args: string[]): Promise<void> {
  const units = flag(args, "--units", 16);
  const computeMs = flag(args, "--compute-ms", 4);
  const commMs = flag(args, "--comm-ms", 4);
  const steps = flag(args, "--steps", 3);
  const serial = await stepMs({ units, computeMs, commMs, steps, prefetch: false });
  const overlapped = await stepMs({ units, computeMs, commMs, steps, prefetch: true });
  const uses = 2 * units;
  console.log(`zero3 gatherer, ${units} units, compute ${computeMs} ms and all_gather ${commMs} ms per use, ${steps} timed steps`);
  console.log(`  model sum(compute, comm)  ${(uses * (computeMs + commMs)).toFixed(1)} ms/step`);
  console.log(`  model max(compute, comm)  ${(uses * Math.max(computeMs, commMs)).toFixed(1)} ms/step`);
  console.log(`  no prefetch (waited)      ${serial.toFixed(1)} ms/step`);
  console.log(`  prefetch window (issued)  ${overlapped.toFixed(1)} ms/step  (${(overlapped / serial).toFixed(2)}× of no prefetch)`);
}
