/**
 * Gradient reduction mechanisms shared by core's data-parallel default and the ZeRO plugins.
 *
 * Determinism (domain.md §5): every gradient is first produced fresh per micro-batch in `unit.grad`
 * and then *added* to the accumulator, and collectives sum ranks in fixed group order
 * (core/src/comm). With f32 gradients and one micro-batch per rank, data parallelism
 * (all_reduce), ZeRO-1 (accumulate, then reduce_scatter) and ZeRO-2/3 (reduce_scatter per
 * micro-batch) therefore produce bit-identical summed gradients, equal to a single rank that
 * accumulates the same micro-batches in rank order.
 */
import type { EngineEnv } from "./hooks.ts";
import type { Unit } from "../nn/unit.ts";
import { accumulateDevice, accumulateHost, halfKind, hostArrayFor, readPadded } from "./host-transfer.ts";
import type { UnitState } from "./unit-state.ts";

/** The engine state of `unit`. @throws if the engine has not partitioned it. */
export function stateOf(env: EngineEnv, unit: Unit): UnitState {
  const s = env.states.get(unit);
  if (!s) throw new Error(`engine: no state for unit ${unit.name} (not partitioned)`);
  return s;
}

/** Add this micro-batch's `unit.grad` into `state.gradAcc` (replicated gradients) and free the
 * unit's per-micro-batch gradient buffers. */
export function accumulateLocal(env: EngineEnv, unit: Unit): void {
  const st = stateOf(env, unit);
  if (!st.gradAcc) throw new Error(`accumulateLocal(${unit.name}): gradients are sharded, use reduceScatterMicro`);
  if (unit.grad && unit.numel > 0) accumulateDevice(env.be, st.gradAcc, 0, unit.grad, 0, unit.numel);
  unit.zeroGrad(true);
}

/** all_reduce (sum, fixed rank order) of `state.gradAcc` over the unit's group, in place. */
export async function allReduceAccumulated(env: EngineEnv, unit: Unit): Promise<void> {
  const st = stateOf(env, unit);
  const g = st.plan.group;
  if (g.size === 1 || unit.numel === 0) return;
  const host = await readPadded(env.be, st.gradAcc!, 0, unit.numel, unit.numel);
  await env.comm.allReduce(host, { group: g, half: halfKind(unit.dtype) });
  env.be.write({ buf: st.gradAcc!, off: 0 }, host);
}

/** reduce_scatter (sum) of the accumulated full `state.gradAcc`; this rank's summed shard is
 * written back into its own region of `gradAcc` (ZeRO-1 keeps full-size gradient buffers; only the
 * owned region is meaningful afterwards). */
export async function reduceScatterAccumulated(env: EngineEnv, unit: Unit): Promise<void> {
  const st = stateOf(env, unit);
  const p = st.plan;
  if (p.group.size === 1 || unit.numel === 0) return;
  const host = await readPadded(env.be, st.gradAcc!, 0, unit.numel, p.shardSize * p.group.size);
  const shard = await env.comm.reduceScatter(host, undefined, { group: p.group, half: halfKind(unit.dtype) });
  if (p.owned > 0) env.be.write({ buf: st.gradAcc!, off: p.shardStart }, shard.subarray(0, p.owned));
}

/** One reduce_scatter input: a unit's fresh micro-batch gradient read to the host, padded to
 * `shardSize · groupSize`; null when the unit's group has one rank (nothing to exchange: the
 * gradient was added into `gradShard` on the device already). */
export interface PendingGrad {
  unit: Unit;
  host: Float32Array | Uint16Array | null;
}

/** Read `unit.grad` to the host (padded for reduce_scatter) and free the unit's gradient buffers.
 * In a group of one rank the shard is the whole unit: the gradient is added into `gradShard` on the
 * device instead, with no host round trip (e.g. expert units when ep_size = world size). */
export async function takeMicroGrad(env: EngineEnv, unit: Unit): Promise<PendingGrad> {
  const st = stateOf(env, unit);
  const p = st.plan;
  if (p.group.size === 1) {
    if (unit.grad && unit.numel > 0) accumulateDevice(env.be, st.gradShard!, 0, unit.grad, 0, unit.numel);
    unit.zeroGrad(true);
    return { unit, host: null };
  }
  const len = p.shardSize * p.group.size;
  const host = unit.grad && unit.numel > 0 ? await readPadded(env.be, unit.grad, 0, unit.numel, len) : hostArrayFor(unit.dtype, len);
  unit.zeroGrad(true);
  return { unit, host };
}

/**
 * reduce_scatter a bucket of micro-batch gradients (all on the same group, same dtype) in ONE
 * collective and add each rank's summed shard into `state.gradShard`. The send buffer interleaves
 * the units by destination rank — `[u₁ part 0, u₂ part 0, … | u₁ part 1, u₂ part 1, … | …]` — so the
 * single reduce_scatter leaves this rank exactly its shard of every unit in the bucket
 * (DeepSpeed's bucketed `reduce_scatter`, `reduce_bucket_size`).
 */
export async function reduceScatterBucket(env: EngineEnv, bucket: PendingGrad[]): Promise<void> {
  if (bucket.length === 0) return;
  const first = stateOf(env, bucket[0]!.unit).plan;
  const g = first.group;
  const n = g.size;
  if (n === 1) return; // takeMicroGrad accumulated these on the device
  const dtype = bucket[0]!.unit.dtype;
  const per = bucket.reduce((s, b) => s + stateOf(env, b.unit).plan.shardSize, 0);
  const send = dtype === "f32" ? new Float32Array(per * n) : new Uint16Array(per * n);
  for (let r = 0, o = 0; r < n; r++) {
    for (const b of bucket) {
      const s = stateOf(env, b.unit).plan.shardSize;
      (send as Float32Array).set((b.host! as Float32Array).subarray(r * s, (r + 1) * s), o);
      o += s;
    }
  }
  const recv = await env.comm.reduceScatter(send, undefined, { group: g, half: halfKind(dtype) });
  let o = 0;
  for (const b of bucket) {
    const st = stateOf(env, b.unit);
    const s = st.plan.shardSize;
    accumulateHost(env.be, st.gradShard!, 0, recv.subarray(o, o + s) as Float32Array | Uint16Array, s);
    o += s;
  }
}
