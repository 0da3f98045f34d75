/**
 * Messages between a rank's {@link ThreadedCommunicator} and its progress thread
 * (progress-worker.ts). Arrays travel as views of SharedArrayBuffers (staging.ts), so the thread
 * works on memory the rank reads back; everything else is plain structured-clone data.
 */

import type { CollectiveName, CommArray, CommReduceOp } from "../communicator.ts";
import type { LocalWorldMemory } from "../local/memory.ts";
import type { TransportOptions } from "../transport-options.ts";
import type { WireError } from "./wire-errors.ts";

/** Which in-thread transport the progress thread runs, with what it needs to attach. */
export type MoverSpec =
  | { kind: "local"; mem: LocalWorldMemory; rank: number; opts: TransportOptions }
  | { kind: "mpi"; opts: TransportOptions };

/** A group as the thread rebuilds it: its world ranks (ascending) and name. */
export interface WireGroup {
  ranks: readonly number[];
  name: string;
}

/** One collective for the thread to run, in the order posted. `arrays` per op:
 * all_reduce [data]; reduce_scatter, all_gather [input, out]; all_to_all_v [send, recv];
 * broadcast [data]; gather [input, out | null]; scatter [input | null, output]; barrier []. */
export interface CallMessage {
  type: "call";
  seq: number;
  op: CollectiveName;
  group: WireGroup;
  arrays: (CommArray | null)[];
  reduce?: { op?: CommReduceOp; average?: boolean; half?: "bf16" | "f16" };
  root?: number;
  sendCounts?: readonly number[];
  recvCounts?: readonly number[];
}

/** Rank → thread. */
export type ToThread =
  | { type: "init"; spec: MoverSpec }
  | CallMessage
  | { type: "gather_bytes"; seq: number; bytes: Uint8Array; root: number }
  | { type: "close"; seq: number }
  | { type: "abort"; code: number };

/** Thread → rank. */
export type FromThread =
  | { type: "ready"; rank: number; worldSize: number }
  | { type: "init_failed"; error: WireError }
  | { type: "done"; seq: number; value?: unknown }
  | { type: "failed"; seq: number; error: WireError };
