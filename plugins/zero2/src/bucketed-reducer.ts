/**
 * The bucketed gradient reducer of ZeRO stage 2 (and 3): each micro-batch's fresh unit gradients
 * are collected into buckets of at most `reduce_bucket_size` elements (a unit larger than the
 * bucket goes alone) and each bucket is reduced with ONE reduce_scatter whose result is added into
 * the owned gradient shards (core's `reduceScatterBucket`). Buckets never mix groups (dense units
 * reduce over dp, expert units over edp) or dtypes.
 *
 * `overlap_comm: true` (DeepSpeed: reduce while backward runs) starts a full bucket's collective
 * without waiting for it: backward continues and the result is awaited at the next bucket or at
 * `finish`. Collectives are still issued in the same order on every rank. With `false`, each
 * bucket is reduced before backward continues.
 */
import { reduceScatterBucket, stateOf, takeMicroGrad, type EngineEnv, type PendingGrad, type ReduceHook } from "@zeromoe/core";

/** A reduce hook implementing bucketed reduce_scatter (see the module comment). */
export function createBucketedReducer(): ReduceHook {
  let bucket: PendingGrad[] = [];
  let elems = 0;
  let inflight: Promise<void> = Promise.resolve();

  const flush = async (env: EngineEnv, wait: boolean): Promise<void> => {
    if (bucket.length > 0) {
      const b = bucket;
      bucket = [];
      elems = 0;
      const prev = inflight;
      inflight = prev.then(() => reduceScatterBucket(env, b));
    }
    if (wait || !env.config.zero_optimization.overlap_comm) await inflight;
  };

  return {
    async gradReady(unit, env) {
      const pending = await takeMicroGrad(env, unit);
      const head = bucket[0];
      if (head) {
        const a = stateOf(env, head.unit).plan.group;
        const b = stateOf(env, unit).plan.group;
        if (a.name !== b.name || head.unit.dtype !== unit.dtype) await flush(env, false);
      }
      bucket.push(pending);
      elems += unit.numel;
      if (elems >= env.config.zero_optimization.reduce_bucket_size) await flush(env, false);
    },
    async finish(env) {
      await flush(env, true);
    },
  };
}
