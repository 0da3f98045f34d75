/**
 * Clean stop on SIGINT/SIGTERM: the launcher's main thread (where signals arrive) sets a flag in
 * shared memory; after every step all ranks agree on it with one tiny all_reduce (max over the
 * world), so they stop after the same step, save a checkpoint there (when `checkpoint.dir` is set),
 * and return normally. Ranks are Worker threads sharing the flag's SharedArrayBuffer (launch
 * structured-clones the args, which shares SharedArrayBuffers). A second signal while the stop is
 * in progress falls through to the default behaviour (the process ends at once) — unless it comes
 * within {@link REPEAT_WINDOW_MS} of the first: that is one request delivered twice (`bun run`
 * forwards SIGTERM to the script, so a SIGTERM sent to the process group, as systemd or Slurm do,
 * reaches the script twice within milliseconds).
 */
import { isMainThread } from "node:worker_threads";
import type { Communicator } from "../comm/communicator.ts";

/** Flag values: 0 = run, otherwise the signal number that asked to stop (2 SIGINT, 15 SIGTERM). */
export type StopFlag = Int32Array;

const SIGNALS = { SIGINT: 2, SIGTERM: 15 } as const;

/** A stop flag in shared memory (one Int32, 0). */
export function createStopFlag(): StopFlag {
  return new Int32Array(new SharedArrayBuffer(4));
}

/** Exit status of `bun run train` for a run stopped by SIGINT/SIGTERM after saving a checkpoint
 * (resumable with `--resume`); a stopped run without `checkpoint.dir` exits 128 + signal. */
export const EXIT_STOPPED_AFTER_SAVE = 3;

let received = 0;

/** The signal number of the first stop request this process received (0: none). Read by the train
 * CLI after the ranks return, to tell a stopped run from a finished one. */
export function receivedStopSignal(): number {
  return received;
}

/** Milliseconds after the first stop signal during which another one is taken as the same request
 * delivered twice (see the module comment), not as "stop now". */
export const REPEAT_WINDOW_MS = 500;

/** Install SIGINT/SIGTERM handlers that set `flag` (first signal) or end the process with the
 * conventional status 128 + signal (a second signal, {@link REPEAT_WINDOW_MS} or more after the
 * first). Returns the function that removes them. */
export function installStopHandlers(flag: StopFlag, onSignal?: (name: string) => void): () => void {
  let firstAt = 0;
  const handlers = Object.entries(SIGNALS).map(([name, num]) => {
    const h = () => {
      const now = performance.now();
      if (Atomics.load(flag, 0) !== 0) {
        if (now - firstAt < REPEAT_WINDOW_MS) return;
        process.exit(128 + num);
      }
      firstAt = now;
      received = num;
      Atomics.store(flag, 0, num);
      onSignal?.(name);
    };
    process.on(name as NodeJS.Signals, h);
    return [name, h] as const;
  });
  return () => {
    for (const [name, h] of handlers) process.off(name as NodeJS.Signals, h);
  };
}

/** Whether any rank saw a stop request: a collective (all_reduce max over the world) every rank
 * calls after every step. Returns the signal number (0 = keep going).
 *
 * On the main thread it first yields to the event loop once (setImmediate: one loop turn, which
 * runs due timers and delivered signals, ~2 µs; a 0 ms timer cost ~1.2 ms per step). A rank
 * under mpirun trains on the process's main thread, and a step's awaits all settle at once
 * (microtasks), so without this the signal handlers that set `flag` and the parent/launcher watch
 * (launch/parent-watch.ts, a timer) never ran there: SIGTERM did not stop the run, and a rank
 * outlived its launcher. `local` ranks are workers: signals and the watch run on the idle main
 * thread, so they do not wait. */
export async function stopRequested(comm: Communicator, flag: StopFlag): Promise<number> {
  if (isMainThread) await new Promise<void>((resolve) => setImmediate(resolve));
  const v = new Int32Array([Atomics.load(flag, 0)]);
  if (comm.worldSize > 1) await comm.allReduce(v, { op: "max" });
  return v[0]!;
}

/** Name of a signal number from {@link stopRequested}. */
export function signalName(num: number): string {
  return Object.entries(SIGNALS).find(([, n]) => n === num)?.[0] ?? `signal ${num}`;
}
