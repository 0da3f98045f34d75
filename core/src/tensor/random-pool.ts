/**
 * Normal fills spread over threads, synchronously: the counter-based Philox stream (random.ts) makes
 * every slice of a stream independent, so a list of fills is cut into shares of at most
 * {@link SHARE_ELEMENTS} elements that any thread may compute, in any order, with the same bits.
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
import { normalFill } from "./random.ts";

/** One fill: elements [start, start + count) of the normal stream `key` (mean, std) into the
 * destination array at `dstOff`. */
export interface NormalFillTask {
  key: [number, number];
  start: number;
  count: number;
  dstOff: number;
  std: number;
  mean: number;
}

/** Largest share (elements) one thread computes at a time. */
export const SHARE_ELEMENTS = 1 << 16;
/** Fills with fewer elements in total run on the caller alone. */
export const PARALLEL_MIN_ELEMENTS = 1 << 19;
/** A claimed share not finished after this long is recomputed by the caller. */
const STALL_MS = 60_000;
/** Workers are ended after this long without a fill. */
const IDLE_MS = 5_000;

/** Message to a worker (random-worker.ts). */
export interface PoolJob {
  /** Int32 [next share to claim, shares done, state per share (0 free, 1 claimed, 2 done)…]. */
  ctl: SharedArrayBuffer;
  /** Destination (f32 or f64 elements). */
  out: SharedArrayBuffer;
  f64: boolean;
  /** Shares, 7 numbers each: key0, key1, start, count, dstOff, std, mean. */
  shares: Float64Array;
}

/** Compute share `s` of `job` into `out` (used by the caller and the workers alike). */
export function runShare(shares: Float64Array, s: number, out: Float32Array | Float64Array): void {
  const o = 7 * s;
  const dstOff = shares[o + 4]!;
  const count = shares[o + 3]!;
  normalFill(out.subarray(dstOff, dstOff + count), [shares[o]!, shares[o + 1]!], shares[o + 2]!, shares[o + 5]!, shares[o + 6]!);
}

/** Claim and compute shares until none is left (the loop every thread runs); returns how many this
 * thread computed. */
export function drainShares(ctl: Int32Array, shares: Float64Array, out: Float32Array | Float64Array): number {
  const n = shares.length / 7;
  for (let mine = 0; ; mine++) {
    const s = Atomics.add(ctl, 0, 1);
    if (s >= n) return mine;
    if (Atomics.compareExchange(ctl, 2 + s, 0, 1) !== 0) continue; // taken over by the caller
    runShare(shares, s, out);
    Atomics.store(ctl, 2 + s, 2);
    Atomics.add(ctl, 1, 1);
    Atomics.notify(ctl, 1);
  }
}

function configuredThreads(): number {
  const env = process.env.ZEROMOE_INIT_THREADS;
  if (env !== undefined && env !== "") {
    const t = Number(env);
    if (!Number.isInteger(t) || t < 1) throw new Error(`ZEROMOE_INIT_THREADS must be a positive integer (threads for parameter initialisation, including the caller), got "${env}"`);
    return t;
  }
  if (!isMainThread) return 1;
  const cores = typeof navigator !== "undefined" && navigator.hardwareConcurrency ? navigator.hardwareConcurrency : 1;
  const local = Math.max(1, Number(process.env.OMPI_COMM_WORLD_LOCAL_SIZE ?? "1") || 1);
  return Math.max(1, Math.min(16, Math.floor(cores / local)));
}

let workers: Worker[] = [];
let retired = false;
let idleTimer: ReturnType<typeof setTimeout> | null = null;

function endWorkers(): void {
  for (const w of workers) w.terminate();
  workers = [];
}

function pool(size: number): Worker[] {
  if (retired) return [];
  while (workers.length < size) {
    let w: Worker;
    try {
      w = new Worker(new URL("./random-worker.ts", import.meta.url).href);
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
 * Run every task of `tasks` into `out` (normalFill semantics, random.ts): the same values as calling
 * `normalFill(out.subarray(t.dstOff, t.dstOff + t.count), t.key, t.start, t.std, t.mean)` for each
 * task, whatever the thread count. Uses worker threads when `out` lives in a SharedArrayBuffer, the
 * tasks total at least {@link PARALLEL_MIN_ELEMENTS} elements and more than one thread is configured
 * (`threads` overrides the configuration; tests use it). Blocks until done. Returns the number of
 * shares other threads computed (0 when everything ran on the caller).
 * @throws if a task lies outside `out`, or ZEROMOE_INIT_THREADS is malformed.
 */
export function normalFillTasks(out: Float32Array | Float64Array, tasks: readonly NormalFillTask[], threads?: number): number {
  let total = 0;
  for (const t of tasks) {
    if (t.dstOff < 0 || t.count < 0 || t.dstOff + t.count > out.length) throw new Error(`normalFillTasks: task [${t.dstOff}, ${t.dstOff + t.count}) outside the destination of ${out.length} elements`);
    total += t.count;
  }
  const nThreads = threads ?? configuredThreads();
  const shared = out.buffer instanceof SharedArrayBuffer;
  if (nThreads <= 1 || !shared || total < PARALLEL_MIN_ELEMENTS) {
    for (const t of tasks) normalFill(out.subarray(t.dstOff, t.dstOff + t.count), t.key, t.start, t.std, t.mean);
    return 0;
  }
  // cut into shares
  const list: number[] = [];
  for (const t of tasks) {
    for (let o = 0; o < t.count; o += SHARE_ELEMENTS) {
      list.push(t.key[0], t.key[1], t.start + o, Math.min(SHARE_ELEMENTS, t.count - o), t.dstOff + o, t.std, t.mean);
    }
  }
  const shares = new Float64Array(new SharedArrayBuffer(8 * list.length));
  shares.set(list);
  const n = list.length / 7;
  const ctl = new Int32Array(new SharedArrayBuffer(4 * (2 + n)));
  const f64 = out instanceof Float64Array;
  // the worker sees `out` from element 0 of its own view: pass the buffer and rebase offsets
  if (out.byteOffset !== 0) for (let s = 0; s < n; s++) shares[7 * s + 4] = shares[7 * s + 4]! + out.byteOffset / out.BYTES_PER_ELEMENT;
  const job: PoolJob = { ctl: ctl.buffer as SharedArrayBuffer, out: out.buffer as SharedArrayBuffer, f64, shares };
  for (const w of pool(Math.min(nThreads - 1, n - 1))) w.postMessage(job);
  const whole = f64 ? new Float64Array(out.buffer) : new Float32Array(out.buffer);
  const byCaller = drainShares(ctl, shares, whole);
  // wait for shares the workers claimed
  let waited = 0;
  while (Atomics.load(ctl, 1) < n) {
    const seen = Atomics.load(ctl, 1);
    const t0 = performance.now();
    Atomics.wait(ctl, 1, seen, 1000);
    waited = Atomics.load(ctl, 1) === seen ? waited + (performance.now() - t0) : 0;
    if (waited >= STALL_MS) {
      // a worker is stuck or gone: compute what is left here and stop using the pool
      for (let s = 0; s < n; s++) if (Atomics.load(ctl, 2 + s) !== 2) runShare(shares, s, whole);
      retired = true;
      endWorkers();
      return 0;
    }
  }
  return n - byCaller;
}
