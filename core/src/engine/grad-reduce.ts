/**
 * Gradient reduction mechanisms shared by core's data-parallel default and the ZeRO plugins.
 *
 * Determinism (docs/domain.md §5): every gradient is first produced fresh per micro-batch in `unit.grad`
 * and then *added* to the accumulator (16-bit experts under a reduce hook that `accumulatesLocally`
 * add their contributions into the accumulator directly, one rounding per micro-batch instead of
 * two: hooks.ts), and collectives sum ranks in fixed group order
 * (core/src/comm). With f32 gradients and one micro-batch per rank, data parallelism
 * (all_reduce), ZeRO-1 (accumulate, then reduce_scatter) and ZeRO-2/3 (reduce_scatter per
 * micro-batch) therefore produce bit-identical summed gradients, equal to a single rank that
 * accumulates the same micro-batches in rank order.
 */
import { accumulateDevice, accumulateHost, halfKind, hostArrayFor, readPadded } from "./host-transfer.ts";
import type { HookContext, JobView, UnitHandle } from "./plugin-context.ts";

/** During the last micro-batch, tell the engine that `unit`'s owned gradient is final for the step
 * (`HookContext.gradReduced`; the offload hook's `gradReduced` copies it out during backward). A
 * context without the verb (a test's stand-in) is left alone. */
function announceReduced(ctx: JobView, unit: UnitHandle): void {
  const h = ctx as JobView & Partial<Pick<HookContext, "isLastMicro" | "gradReduced">>;
  if (h.isLastMicro && h.gradReduced) h.gradReduced(unit);
}

/** Add this micro-batch's gradient (`unit.microGrad()`) into the unit's whole-unit accumulator
 * (replicated gradients) and free the micro-batch gradient.
 * @throws when the unit's gradients are sharded (use {@link takeMicroGrad}). */
export function accumulateLocal(ctx: JobView, unit: UnitHandle): void {
  if (unit.plan.grads === "sharded") throw new Error(`accumulateLocal(${unit.name}): gradients are sharded, use takeMicroGrad + reduceScatterBucket`);
  const g = unit.microGrad();
  if (g && unit.numel > 0) accumulateDevice(ctx.be, unit.gradAccumulator(), 0, g, 0, unit.numel);
  unit.releaseMicroGrad();
}

/** all_reduce (sum, fixed rank order) of the unit's accumulated whole gradient over its group, in place. */
export async function allReduceAccumulated(ctx: JobView, unit: UnitHandle): Promise<void> {
  const g = unit.group;
  if (g.size > 1 && unit.numel > 0) {
    const acc = unit.gradAccumulator();
    const host = await readPadded(ctx.be, acc, 0, unit.numel, unit.numel);
    await ctx.comm.allReduce(host, { group: g, half: halfKind(unit.dtype) });
    ctx.be.write({ buf: acc, off: 0 }, host);
  }
  announceReduced(ctx, unit);
}

/** reduce_scatter (sum) of the accumulated whole gradient; this rank's summed shard is written
 * back into its own region of the accumulator (ZeRO-1 keeps full-size gradient buffers; only the
 * owned region is meaningful afterwards). */
export async function reduceScatterAccumulated(ctx: JobView, unit: UnitHandle): Promise<void> {
  const p = unit.plan;
  if (p.group.size > 1 && unit.numel > 0) {
    const acc = unit.gradAccumulator();
    const host = await readPadded(ctx.be, acc, 0, unit.numel, p.shardSize * p.group.size);
    const shard = await ctx.comm.reduceScatter(host, undefined, { group: p.group, half: halfKind(unit.dtype) });
    if (p.owned > 0) ctx.be.write({ buf: acc, off: p.shardStart }, shard.subarray(0, p.owned));
  }
  announceReduced(ctx, unit);
}

/** One reduce_scatter input: a unit's fresh micro-batch gradient read to the host, padded to
 * `shardSize · groupSize`; null when the unit's group has one rank (nothing to exchange: the
 * gradient was added into the gradient shard on the device already). */
export interface PendingGrad {
  unit: UnitHandle;
  host: Float32Array | Uint16Array | null;
  /** Taken during the last micro-batch of the step: adding its reduction completes the unit's owned
   * gradient (a bucket may still hold the same unit's entry of an earlier micro-batch). */
  lastMicro?: boolean;
}

/** Read the unit's micro-batch gradient to the host (padded for reduce_scatter) and free it.
 * In a group of one rank the shard is the whole unit: the gradient is added into the shard on the
 * device instead, with no host round trip (e.g. expert units when ep_size = world size). */
export async function takeMicroGrad(ctx: JobView, unit: UnitHandle): Promise<PendingGrad> {
  const p = unit.plan;
  const g = unit.microGrad();
  if (p.group.size === 1) {
    if (g && unit.numel > 0) accumulateDevice(ctx.be, unit.gradAccumulator(), 0, g, 0, unit.numel);
    unit.releaseMicroGrad();
    announceReduced(ctx, unit);
    return { unit, host: null };
  }
  const len = p.shardSize * p.group.size;
  const host = g && unit.numel > 0 ? await readPadded(ctx.be, g, 0, unit.numel, len) : hostArrayFor(unit.dtype, len);
  unit.releaseMicroGrad();
  return { unit, host, lastMicro: (ctx as Partial<HookContext>).isLastMicro === true };
}

/**
 * reduce_scatter a bucket of micro-batch gradients (all on the same group, same dtype) in ONE
 * collective and add each rank's summed shard into the unit's gradient shard. The send buffer
 * interleaves the units by destination rank — `[u₁ part 0, u₂ part 0, … | u₁ part 1, u₂ part 1, … | …]`
 * — so the single reduce_scatter leaves this rank exactly its shard of every unit in the bucket
 * (DeepSpeed's bucketed `reduce_scatter`, `reduce_bucket_size`).
 */
export async function reduceScatterBucket(ctx: JobView, bucket: PendingGrad[]): Promise<void> {
  await issueReduceScatterBucket(ctx, bucket);
}

/**
 * {@link reduceScatterBucket} split at the collective: builds the send buffer and *issues* the
 * reduce_scatter, returning at once with a promise that settles when its result has been added into
 * the gradient shards — after the collective has completed and after `after` (pass the previous
 * bucket's promise: additions then run in issue order, so the sums are the same bits as awaiting
 * each bucket where it is issued). DeepSpeed's `overlap_comm`: buckets reduce while backward runs.
 */
export function issueReduceScatterBucket(ctx: JobView, bucket: PendingGrad[], after: Promise<void> = Promise.resolve()): Promise<void> {
  if (bucket.length === 0) return after;
  const g = bucket[0]!.unit.group;
  const n = g.size;
  if (n === 1) return after; // takeMicroGrad accumulated these on the device
  const dtype = bucket[0]!.unit.dtype;
  const per = bucket.reduce((s, b) => s + b.unit.plan.shardSize, 0);
  const send = dtype === "f32" ? new Float32Array(per * n) : new Uint16Array(per * n);
  for (let r = 0, o = 0; r < n; r++) {
    for (const b of bucket) {
      const s = b.unit.plan.shardSize;
      (send as Float32Array).set((b.host! as Float32Array).subarray(r * s, (r + 1) * s), o);
      o += s;
    }
  }
  const work = ctx.comm.reduceScatter(send, undefined, { group: g, half: halfKind(dtype) });
  return Promise.all([after, work.wait()]).then(([, recv]) => {
    let o = 0;
    for (const b of bucket) {
      const s = b.unit.plan.shardSize;
      accumulateHost(ctx.be, b.unit.gradAccumulator(), 0, recv.subarray(o, o + s) as Float32Array | Uint16Array, s);
      if (b.lastMicro) announceReduced(ctx, b.unit);
      o += s;
    }
  });
}
