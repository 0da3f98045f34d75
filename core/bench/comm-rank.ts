/**
 * Rank entry of the communication benchmark (comm.ts): for each size, times all_reduce,
 * reduce_scatter, all_gather and all_to_all_v (even counts) on Float32Array data and returns this
 * rank's mean seconds per call; first the latency of a one-element all_reduce and of a barrier. Not a benchmark of its own (the leading `_` hides it from
 * `bun run bench`).
 */

import type { Communicator } from "../src/comm/communicator.ts";

/** Arguments the benchmark passes to every rank. */
export interface CommBenchArgs {
  /** Array sizes in bytes (the full array of each collective). */
  sizes: number[];
  /** Least timed calls per op and size (after one warm-up call); small sizes get more, so that each
   * op moves at least 64 MB in total (at most 100 calls). */
  iters: number;
}

/** Mean seconds per call, keyed `${op}:${bytes}`, plus `latency_all_reduce` (one f32) and
 * `latency_barrier`. */
export type CommBenchTimes = Record<string, number>;

/** Rank entry: returns this rank's timings (see the file comment). */
export default async function main(comm: Communicator, rank: number, n: number, a: CommBenchArgs): Promise<CommBenchTimes> {
  const out: CommBenchTimes = {};
  // Latency: one-element all_reduce and barrier.
  const one = new Float32Array([rank + 0.5]);
  for (let k = 0; k < 100; k++) await comm.allReduce(one);
  let t = performance.now();
  for (let k = 0; k < 1000; k++) await comm.allReduce(one);
  out["latency_all_reduce"] = (performance.now() - t) / 1000 / 1000;
  t = performance.now();
  for (let k = 0; k < 1000; k++) await comm.barrier();
  out["latency_barrier"] = (performance.now() - t) / 1000 / 1000;
  for (const bytes of a.sizes) {
    const len = Math.floor(bytes / 4 / n) * n; // divisible by n for reduce_scatter / all_to_all_v
    const full = new Float32Array(len);
    for (let i = 0; i < len; i++) full[i] = ((i * 2654435761 + rank * 97) % 1000) / 999 - 0.5;
    const shard = new Float32Array(len / n);
    const recv = new Float32Array(len);
    const counts = new Array(n).fill(len / n);
    const ops: Record<string, () => PromiseLike<unknown>> = {
      all_reduce: () => comm.allReduce(full),
      reduce_scatter: () => comm.reduceScatter(full, shard),
      all_gather: () => comm.allGather(shard, recv),
      all_to_all_v: () => comm.allToAllV(full, counts, counts, recv),
    };
    const iters = Math.max(a.iters, Math.min(100, Math.ceil(64e6 / bytes)));
    for (const [name, fn] of Object.entries(ops)) {
      await fn(); // warm-up
      await comm.barrier();
      const t0 = performance.now();
      for (let k = 0; k < iters; k++) await fn();
      out[`${name}:${bytes}`] = (performance.now() - t0) / 1000 / iters;
    }
  }
  return out;
}
