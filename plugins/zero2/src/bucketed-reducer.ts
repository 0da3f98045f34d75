/**
 * The bucketed gradient reducer of ZeRO stage 2 (and 3): each micro-batch's fresh unit gradients
 * are collected into buckets and each bucket is reduced with ONE reduce_scatter whose result is
 * added into the owned gradient shards (core's `reduceScatterBucket`). Buckets never mix groups
 * (dense units reduce over dp, expert units over edp) or dtypes: each (group, dtype) has its own
 * open bucket.
 *
 * Where a bucket closes must not depend on the rank: every member of its group has to issue its
 * reduce_scatter at the same place among the model's other collectives (the MoE dispatch/combine
 * all_to_all_v, the other groups' buckets). The members of a unit's group all hold that unit with
 * the same `trainable` flag (dense units are on every rank of dp; an edp group's members hold the
 * same experts), so they all see its gradient arrive. A unit's arrival therefore closes an open
 * bucket of another group only when every member of that bucket's group is a member of the unit's
 * group — a dense unit closes the expert buckets, and at ep_size 1 (edp has dp's members) every
 * arrival closes the other open bucket, one bucket open at a time. An expert's arrival never closes
 * the dense bucket under expert parallelism: with frozen experts (the job's `freeze`) a rank
 * holding only frozen experts in a layer sees no expert arrive there, and closing the dense bucket
 * on the others would put their dense reduce_scatter before the layer's dispatch all_to_all_v and
 * its after it (plugins/zero3/test/frozen-experts-ep.test.ts).
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
 * (core/src/comm), so ranks agree on the order whichever completes first. `finish` flushes the open
 * buckets in the order they were opened, which is the same on every member of a group.
 */
import type { Group } from "@zeromoe/core/comm";
import { issueReduceScatterBucket, takeMicroGrad, type HookContext, type PendingGrad, type ReduceHook } from "@zeromoe/core/plugin";

/** One open bucket: the pending gradients of one (group, dtype) and the elements they send. */
interface OpenBucket { group: Group; pending: PendingGrad[]; elems: number }

/** Whether every member of `a` is a member of `b` (world ranks). */
function within(a: Group, b: Group): boolean {
  const members = new Set(b.ranks);
  return a.ranks.every((r) => members.has(r));
}

/** A reduce hook implementing bucketed reduce_scatter (see the module comment). */
export function createBucketedReducer(): ReduceHook {
  /** Open buckets by `group name|dtype`, in the order they were opened. */
  const open = new Map<string, OpenBucket>();
  /** Settles when every bucket issued so far has been added into the gradient shards. */
  let inFlight: Promise<void> = Promise.resolve();

  const flush = async (ctx: HookContext, key: string): Promise<void> => {
    const b = open.get(key);
    if (!b) return;
    open.delete(key);
    inFlight = issueReduceScatterBucket(ctx, b.pending, inFlight);
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
      const key = `${unit.group.name}|${unit.dtype}`;
      const bound = ctx.config.zero_optimization.reduce_bucket_size;
      const size = unit.plan.shardSize * unit.group.size;
      // close the other groups' buckets whose members all see this unit arrive (module comment)
      for (const [k, o] of [...open]) if (k !== key && within(o.group, unit.group)) await flush(ctx, k);
      const cur = open.get(key);
      if (cur && cur.elems + size > bound) await flush(ctx, key);
      const b = open.get(key) ?? { group: unit.group, pending: [], elems: 0 };
      open.set(key, b);
      b.pending.push(pending);
      b.elems += size;
      if (b.elems >= bound) await flush(ctx, key);
    },
    async finish(ctx) {
      for (const key of [...open.keys()]) await flush(ctx, key);
      const all = inFlight;
      inFlight = Promise.resolve();
      await all;
    },
  };
}
