/** Messages and start data exchanged between the launcher and its rank workers. */

import type { LocalWorldMemory } from "../comm/local/memory.ts";

/** What each rank worker receives as `workerData`. */
export interface RankWorkerData {
  rank: number;
  worldSize: number;
  mem: LocalWorldMemory;
  /** Absolute file URL (or module specifier) of the entry module. */
  entry: string;
  /** Passed to the entry function as its 4th argument (structured-cloned). */
  args: unknown;
  /** Collective timeout, ms. */
  timeoutMs: number;
}

/** A rank's final message: its entry's return value, or the error it threw. `aborted` marks a
 * CommAbortedError, i.e. a consequence of another rank's failure rather than a cause. */
export type RankMessage =
  | { type: "result"; rank: number; value: unknown }
  | { type: "error"; rank: number; name: string; message: string; stack: string; aborted: boolean };
