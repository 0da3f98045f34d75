/**
 * The cpu backend's `randomFill` spread over threads, synchronously: the Philox stream is
 * counter-based, so a fill is cut into shares of at most {@link SHARE_ELEMENTS} elements that any
 * thread may compute, in any order, with the same bits (numerics/random-fill.ts `philoxFill`).
 *
 * The calling thread and a pool of Bun Workers (random-worker.ts) take shares from one shared
 * counter (work stealing over a SharedArrayBuffer with Atomics); the caller then blocks in
 * `Atomics.wait` until every share is done. A worker that has not started yet simply takes no share
 * (the caller does them all), so the result never depends on thread timing, and no event loop turn
 * is needed (model constructors stay synchronous). A share a worker claimed but did not finish
 * within {@link STALL_MS} is recomputed by the caller (same values) and the pool is retired.
 *
 * Threads: `ZEROMOE_INIT_THREADS` (total, including the caller; 1 = no workers) if set, else the
 * host's cores (navigator.hardwareConcurrency) divided by the MPI ranks on this host
 * (OMPI_COMM_WORLD_LOCAL_SIZE), capped at 16. Inside a worker thread (a rank of the local launcher,
 * whose siblings already use the other cores) no pool is made. Workers are created on the first
 * large fill and ended after {@link IDLE_MS} without use; they never keep the process alive.
 */
import { isMainThread } from "node:worker_threads";
import type { RandomFillSpec } from "../backend.ts";
import { philoxFill } from "../numerics/random-fill.ts";
import { startWorker, type WorkerThread } from "../runtime/threads.ts";

/** Largest share (elements) one thread computes at a time. */
export const SHARE_ELEMENTS = 1 << 16;
/** Fills of fewer elements run on the caller alone. */
export const PARALLEL_MIN_ELEMENTS = 1 << 19;
/** A claimed share not finished after this long is recomputed by the caller. */
const STALL_MS = 60_000;
/** Workers are ended after this long without a fill. */
const IDLE_MS = 5_000;

/** Message to a worker (random-worker.ts). */
export interface PoolJob {
  /** Int32 [next share to claim, shares done, state per share (0 free, 1 claimed, 2 done)…]. */
  ctl: SharedArrayBuffer;
  /** Destination: f32 elements [offset, offset + length) of this buffer. */
  out: SharedArrayBuffer;
  offset: number;
  length: number;
  spec: RandomFillSpec;
}

/** Compute share `s` (elements [s·SHARE, …) of the fill) into `out`. */
function runShare(out: Float32Array, spec: RandomFillSpec, s: number): void {
  const j = s * SHARE_ELEMENTS;
  philoxFill(out.subarray(j, Math.min(out.length, j + SHARE_ELEMENTS)), { ...spec, start: spec.start + j });
}

/** Claim and compute shares until none is left (the loop every thread runs); returns how many this
 * thread computed. */
export function drainShares(ctl: Int32Array, out: Float32Array, spec: RandomFillSpec): number {
  const n = Math.ceil(out.length / SHARE_ELEMENTS);
  for (let mine = 0; ; mine++) {
    const s = Atomics.add(ctl, 0, 1);
    if (s >= n) return mine;
    if (Atomics.compareExchange(ctl, 2 + s, 0, 1) !== 0) continue; // taken over by the caller
    runShare(out, spec, s);
    Atomics.store(ctl, 2 + s, 2);
    Atomics.add(ctl, 1, 1);
    Atomics.notify(ctl, 1);
  }
}

function configuredThreads(): number {
  const env = process.env.ZEROMOE_INIT_THREADS;
  if (env !== undefined && env !== "") {
    const t = Number(env);
    if (!Number.isInteger(t) || t < 1) throw new Error(`ZEROMOE_INIT_THREADS must be a positive integer (threads for the cpu backend's random fills, including the caller), got "${env}"`);
    return t;
  }
  if (!isMainThread) return 1;
  const cores = typeof navigator !== "undefined" && navigator.hardwareConcurrency ? navigator.hardwareConcurrency : 1;
  const local = Math.max(1, Number(process.env.OMPI_COMM_WORLD_LOCAL_SIZE ?? "1") || 1);
  return Math.max(1, Math.min(16, Math.floor(cores / local)));
}

let workers: WorkerThread<PoolJob>[] = [];
let retired = false;
let idleTimer: ReturnType<typeof setTimeout> | null = null;

function endWorkers(): void {
  for (const w of workers) w.terminate();
  workers = [];
}

function pool(size: number): WorkerThread<PoolJob>[] {
  if (retired) return [];
  while (workers.length < size) {
    let w: WorkerThread<PoolJob>;
    try {
      w = startWorker<PoolJob>(new URL("./random-worker.ts", import.meta.url));
    } catch {
      retired = true;
      endWorkers();
      return [];
    }
    w.onerror = () => {
      retired = true;
      endWorkers();
    };
    w.unref();
    workers.push(w);
  }
  if (idleTimer) clearTimeout(idleTimer);
  idleTimer = setTimeout(endWorkers, IDLE_MS);
  (idleTimer as { unref?: () => void }).unref?.();
  return workers;
}

/**
 * `philoxFill(out, spec)` (spec already checked), using worker threads when `out` lives in a
 * SharedArrayBuffer, has at least {@link PARALLEL_MIN_ELEMENTS} elements and more than one thread is
 * configured (`threads` overrides the configuration; tests use it). Same bits whatever the thread
 * count. Blocks until done. Returns the number of shares other threads computed.
 * @throws if ZEROMOE_INIT_THREADS is malformed.
 */
export function philoxFillThreaded(out: Float32Array, spec: RandomFillSpec, threads?: number): number {
  const nThreads = threads ?? configuredThreads();
  if (nThreads <= 1 || !(out.buffer instanceof SharedArrayBuffer) || out.length < PARALLEL_MIN_ELEMENTS) {
    philoxFill(out, spec);
    return 0;
  }
  const n = Math.ceil(out.length / SHARE_ELEMENTS);
  const ctl = new Int32Array(new SharedArrayBuffer(4 * (2 + n)));
  const job: PoolJob = { ctl: ctl.buffer as SharedArrayBuffer, out: out.buffer, offset: out.byteOffset / 4, length: out.length, spec: { ...spec, key: [spec.key[0], spec.key[1]] } };
  for (const w of pool(Math.min(nThreads - 1, n - 1))) w.postMessage(job);
  const byCaller = drainShares(ctl, out, spec);
  let waited = 0;
  while (Atomics.load(ctl, 1) < n) {
    const seen = Atomics.load(ctl, 1);
    const t0 = performance.now();
    Atomics.wait(ctl, 1, seen, 1000);
    waited = Atomics.load(ctl, 1) === seen ? waited + (performance.now() - t0) : 0;
    if (waited >= STALL_MS) {
      // a worker is stuck or gone: compute what is left here and stop using the pool
      for (let s = 0; s < n; s++) if (Atomics.load(ctl, 2 + s) !== 2) runShare(out, spec, s);
      retired = true;
      endWorkers();
      return 0;
    }
  }
  return n - byCaller;
}
