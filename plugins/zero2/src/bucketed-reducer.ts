/**
 * The bucketed gradient reducer of ZeRO stage 2 (and 3): each micro-batch's fresh unit gradients
 * are collected into buckets and each bucket is reduced with ONE reduce_scatter whose result is
 * added into the owned gradient shards (core's `reduceScatterBucket`). Buckets never mix groups
 * (dense units reduce over dp, expert units over edp) or dtypes.
 *
 * `reduce_bucket_size` is a bound on the elements one reduce_scatter sends (each unit counts with its
 * padded length `shardSize · group size`, what actually goes on the wire): a unit that would push the
 * open bucket past the bound flushes the bucket first, so a bucket never exceeds the bound except a
 * bucket holding a single unit that is larger than it by itself (DeepSpeed's `reduce_bucket_size`,
 * deepspeed.ai config-json "ZeRO Optimizations": "number of elements reduced/allreduced at a time").
 *
 * `overlap_comm` (DeepSpeed: reduce while backward runs): when true, a bucket's reduce_scatter is
 * issued when the bucket fills and the backward pass carries on; its result is added into the
 * gradient shards when it completes (in issue order, so the sums are the same bits as without
 * overlap), and `finish` waits for every bucket still in flight at the end of the step. When false,
 * each bucket is waited where it is issued. Issuing fixes the collective's place in the rank's order
 * (core/src/comm), so ranks agree on the order whichever completes first.
 */
import { issueReduceScatterBucket, takeMicroGrad, type HookContext, type PendingGrad, type ReduceHook } from "@zeromoe/core/plugin";

/** A reduce hook implementing bucketed reduce_scatter (see the module comment). */
export function createBucketedReducer(): ReduceHook {
  let bucket: PendingGrad[] = [];
  let elems = 0;
  /** Settles when every bucket issued so far has been added into the gradient shards. */
  let inFlight: Promise<void> = Promise.resolve();

  const flush = async (ctx: HookContext): Promise<void> => {
    if (bucket.length === 0) return;
    const b = bucket;
    bucket = [];
    elems = 0;
    inFlight = issueReduceScatterBucket(ctx, b, inFlight);
    // a failure is reported where the bucket is waited (here, or at finish), not as unhandled
    inFlight.catch(() => undefined);
    if (!ctx.config.zero_optimization.overlap_comm) await inFlight;
  };

  return {
    // in a group of one rank takeMicroGrad only adds the micro-batch gradient into the (whole-unit)
    // shard on the device: a 16-bit expert may add into it directly (hooks.ts)
    accumulatesLocally: (unit) => unit.group.size === 1,
    async gradReady(unit, ctx) {
      const pending = await takeMicroGrad(ctx, unit);
      const head = bucket[0];
      if (head && (head.unit.group.name !== unit.group.name || head.unit.dtype !== unit.dtype)) await flush(ctx);
      const bound = ctx.config.zero_optimization.reduce_bucket_size;
      const size = unit.plan.shardSize * unit.group.size;
      if (bucket.length > 0 && elems + size > bound) await flush(ctx);
      bucket.push(pending);
      elems += size;
      if (elems >= bound) await flush(ctx);
    },
    async finish(ctx) {
      await flush(ctx);
      const all = inFlight;
      inFlight = Promise.resolve();
      await all;
    },
  };
}
