/**
 * Worker thread of the normal-fill pool (random-pool.ts): for each job posted, take shares from the
 * job's shared counter and compute them into the job's shared destination until none is left.
 */
import { drainShares, type PoolJob } from "./random-pool.ts";

declare const self: Worker;

self.onmessage = (e: MessageEvent<PoolJob>) => {
  const { ctl, out, f64, shares } = e.data;
  drainShares(new Int32Array(ctl), shares, f64 ? new Float64Array(out) : new Float32Array(out));
};
