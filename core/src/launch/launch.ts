/**
 * Start a job of `worldSize` ranks on the `local` transport: one Bun Worker (node:worker_threads)
 * per rank, all sharing one {@link LocalWorldMemory}. Each rank imports the entry module and runs
 * `entry(comm, rank, worldSize, args)`; `launch` resolves with the ranks' return values in rank
 * order.
 *
 * Failure semantics (docs/comm.md): when a rank throws, exits (`process.exit`, any code) before
 * returning, or its worker reports an uncaught error, the job is aborted: the abort word in shared
 * memory is set (first failing rank wins) and every rank blocked in a collective wakes with a
 * CommAbortedError; after `graceMs` any worker still alive is terminated. `launch` then rejects with
 * a {@link LaunchError} naming the first failing rank and its error. No worker outlives the call.
 * A native crash (e.g. a segfault in FFI code) ends the whole process, since ranks are threads.
 */

import { existsSync } from "node:fs";
import { resolve as resolvePath } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import type { Communicator } from "../comm/communicator.ts";
import { timeoutMsFromEnv } from "../comm/transport-options.ts";
import { ABORT, abortWorld, createLocalWorldMemory, slotBytesFromEnv } from "../comm/local/memory.ts";
import type { RankMessage, RankWorkerData } from "./protocol.ts";

/** Exit code of a worker whose top-level await never settled (Node's and Bun's "unsettled
 * top-level await"). */
const EXIT_UNSETTLED_AWAIT = 13;

/** Signature of an entry module's default (or `main`) export. */
export type RankEntry<A = unknown, R = unknown> = (comm: Communicator, rank: number, worldSize: number, args: A) => R | Promise<R>;

/** Options of {@link launch}. */
export interface LaunchOptions<A = unknown> {
  /** Number of ranks, ≥ 1. */
  worldSize: number;
  /** Entry module: a file path (relative to the working directory) or a `file:` URL. */
  entry: string | URL;
  /** Passed to every rank's entry (structured-cloned). */
  args?: A;
  /** Collective timeout in seconds; default env ZEROMOE_COMM_TIMEOUT_S or 300. */
  timeoutS?: number;
  /** Arena bytes per rank; default env ZEROMOE_COMM_ARENA_MB, else 16 MiB (256 MiB / worldSize past 16 ranks, at least 1 MiB). */
  slotBytes?: number;
  /** After a failure, how long surviving ranks get to unwind before being terminated; default 2000 ms. */
  graceMs?: number;
}

/** One rank's failure as seen by the launcher. */
export interface RankFailure {
  rank: number;
  /** Error name and message, or how the worker ended. */
  message: string;
  /** Stack trace when one exists. */
  stack?: string;
  /** True when the rank only failed because the job was aborted (not a cause). */
  aborted: boolean;
}

/** A launched job failed. `rank` is the first failing rank; `failures` lists every rank's failure. */
export class LaunchError extends Error {
  override readonly name = "LaunchError";
  constructor(
    readonly rank: number,
    readonly failures: readonly RankFailure[],
  ) {
    const cause = failures.find((f) => f.rank === rank);
    const others = failures.filter((f) => f.rank !== rank).map((f) => `rank ${f.rank}: ${f.message}`);
    super(
      `rank ${rank} failed: ${cause?.stack ?? cause?.message ?? "unknown error"}` +
        (others.length ? `\nother ranks: ${others.join("; ")}` : ""),
    );
  }
}

function entryUrl(entry: string | URL): string {
  if (entry instanceof URL) return entry.href;
  if (/^(file|https?|data):/.test(entry)) return entry;
  return pathToFileURL(resolvePath(process.cwd(), entry)).href;
}

/**
 * Run `worldSize` ranks of `entry` and return their results in rank order. Rejects with
 * {@link LaunchError} when any rank fails (see the file comment); throws at once on invalid
 * options or a missing entry file.
 */
export function launch<R = unknown, A = unknown>(opts: LaunchOptions<A>): Promise<R[]> {
  const W = opts.worldSize;
  if (!Number.isInteger(W) || W < 1) throw new Error(`launch: worldSize must be a positive integer, got ${W}`);
  if (opts.timeoutS !== undefined && !(opts.timeoutS > 0)) throw new Error(`launch: timeoutS must be > 0, got ${opts.timeoutS}`);
  const mem = createLocalWorldMemory(W, opts.slotBytes ?? slotBytesFromEnv(W));
  const timeoutMs = opts.timeoutS !== undefined ? opts.timeoutS * 1000 : timeoutMsFromEnv();
  const graceMs = opts.graceMs ?? 2000;
  const entry = entryUrl(opts.entry);
  if (entry.startsWith("file:") && !existsSync(fileURLToPath(entry))) {
    throw new Error(`launch: entry module not found: ${fileURLToPath(entry)} (from entry "${String(opts.entry)}")`);
  }
  const workerUrl = new URL("./rank-worker.ts", import.meta.url);

  return new Promise<R[]>((resolve, reject) => {
    const results: unknown[] = new Array(W);
    const finished = new Array<boolean>(W).fill(false); // result or failure received
    const exited = new Array<boolean>(W).fill(false);
    const failures: RankFailure[] = [];
    let done = false;
    let graceTimer: ReturnType<typeof setTimeout> | undefined;
    const workers: Worker[] = [];

    const settle = (): void => {
      if (done) return;
      const ok = failures.length === 0 && finished.every(Boolean);
      const allExited = exited.every(Boolean);
      if (!ok && !(failures.length > 0 && (allExited || finished.every(Boolean)))) return;
      done = true;
      if (graceTimer) clearTimeout(graceTimer);
      void Promise.all(workers.map((w) => w.terminate().catch(() => 0))).then(() => {
        if (ok) {
          resolve(results as R[]);
          return;
        }
        const code = Atomics.load(new Int32Array(mem.control), ABORT);
        const first = code > 0 ? code - 1 : (failures.find((f) => !f.aborted) ?? failures[0]).rank;
        const sorted = [...failures].sort((a, b) => a.rank - b.rank);
        if (!sorted.some((f) => f.rank === first)) sorted.push({ rank: first, message: "failed (no report received)", aborted: false });
        reject(new LaunchError(first, sorted));
      });
    };

    const fail = (f: RankFailure): void => {
      if (finished[f.rank]) return;
      finished[f.rank] = true;
      failures.push(f);
      abortWorld(mem, f.aborted ? -1 : f.rank);
      if (!graceTimer && !done) {
        graceTimer = setTimeout(() => {
          for (let r = 0; r < W; r++) {
            if (!finished[r]) {
              finished[r] = true;
              failures.push({ rank: r, message: `terminated after the job was aborted (grace ${graceMs} ms)`, aborted: true });
            }
          }
          settle();
        }, graceMs);
      }
      settle();
    };

    for (let r = 0; r < W; r++) {
      const data: RankWorkerData = { rank: r, worldSize: W, mem, entry, args: opts.args, timeoutMs };
      const w = new Worker(workerUrl, { workerData: data });
      workers.push(w);
      w.on("message", (m: RankMessage) => {
        if (m.type === "result") {
          if (finished[r]) return;
          finished[r] = true;
          results[r] = m.value;
          settle();
        } else {
          fail({ rank: r, message: `${m.name}: ${m.message}`, stack: m.stack, aborted: m.aborted });
        }
      });
      w.on("error", (e: unknown) => {
        const err = e instanceof Error ? e : new Error(String(e));
        fail({ rank: r, message: `uncaught ${err.name}: ${err.message}`, stack: err.stack, aborted: false });
      });
      w.on("exit", (code: number) => {
        exited[r] = true;
        // 13: the worker's top-level await (rank-worker.ts awaits the entry) never settled and its
        // event loop emptied — an await nothing can resolve, e.g. a lost device's mapAsync
        const why = code === EXIT_UNSETTLED_AWAIT
          ? `its entry function awaited a promise that can never settle (nothing was left to run on its thread; worker exit code ${code})`
          : `worker exited with code ${code} before returning a result`;
        if (!finished[r]) fail({ rank: r, message: why, aborted: false });
        settle();
      });
    }
  });
}
