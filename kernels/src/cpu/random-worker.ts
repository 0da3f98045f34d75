/**
 * Worker thread of the cpu backend's random-fill pool (random-pool.ts): for each job posted, take
 * shares from the job's shared counter and compute them into the job's shared destination until
 * none is left.
 */
import { drainShares, type PoolJob } from "./random-pool.ts";
import { serveParent } from "../runtime/threads.ts";

serveParent<PoolJob>((job) => {
  const { ctl, out, offset, length, spec } = job;
  drainShares(new Int32Array(ctl), new Float32Array(out, 4 * offset, length), spec);
});
