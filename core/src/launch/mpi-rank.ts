/**
 * One rank of a job on the `mpi` transport, in its own process started by Open MPI's `mpirun`
 * (docs/comm.md "The mpi transport"). {@link runMpiRank} attaches an mpi communicator whose
 * collectives (and MPI_Init, and every other MPI call) run on the rank's progress thread
 * (comm/progress/threaded-communicator.ts),
 * imports the entry module and runs its default (or `main`) export as `(comm, rank, worldSize,
 * args)` — the same entry contract as `launch` — then gathers every rank's return value to rank 0
 * (structured-serialized with bun:jsc, so typed arrays, NaN and ±Infinity survive) and leaves MPI.
 *
 * Failure: a rank whose entry throws reports the error (the `onError` callback) and calls
 * MPI_Abort, so mpirun ends every other rank at once and exits with the abort's code; the others
 * are killed, not left waiting. Run as a script (`bun mpi-rank.ts <entry> <args file> <out dir>`,
 * what `launchMpi` starts), rank 0 writes `results.bin` into the out dir and a failing rank writes
 * `error-<rank>.bin` before aborting.
 */

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { deserialize, serialize } from "@zeromoe/kernels/runtime";
import { CommAbortedError } from "../comm/errors.ts";
import { ThreadedCommunicator } from "../comm/progress/threaded-communicator.ts";

/** Options of {@link runMpiRank}. */
export interface MpiRankOptions<A> {
  /** Entry module: a file URL or absolute path. */
  entry: string | URL;
  /** Passed to the entry function as its 4th argument. */
  args: A;
  /** Collective timeout in seconds (default env ZEROMOE_COMM_TIMEOUT_S or 300). */
  timeoutS?: number;
  /**
   * Called with this rank's error before the job is aborted; returns the exit code for MPI_Abort
   * (mpirun exits with it). Default: print the error with its stack to stderr, code 1.
   */
  onError?: (e: Error, rank: number) => number;
}

/** A rank's error as written to `error-<rank>.bin`. */
export interface MpiRankError {
  rank: number;
  name: string;
  message: string;
  stack: string;
  aborted: boolean;
}

/**
 * Run this process's rank of `entry` (see the file comment). Resolves at rank 0 with every rank's
 * result in rank order, elsewhere with null, after MPI_Finalize. When the entry throws, calls
 * `onError` then MPI_Abort and never resolves (the process ends). Throws (without aborting) only
 * when MPI cannot be initialised.
 */
export async function runMpiRank<R = unknown, A = unknown>(o: MpiRankOptions<A>): Promise<R[] | null> {
  const comm = await ThreadedCommunicator.mpi({ timeoutMs: o.timeoutS !== undefined ? o.timeoutS * 1000 : undefined });
  let value: unknown;
  try {
    const mod = (await import(o.entry instanceof URL ? o.entry.href : o.entry)) as Record<string, unknown>;
    const fn = (mod.default ?? mod.main) as unknown;
    if (typeof fn !== "function") throw new Error(`mpi launch: entry ${String(o.entry)} must export a default function or "main" taking (comm, rank, worldSize, args)`);
    value = await (fn as (...a: unknown[]) => unknown)(comm, comm.rank, comm.worldSize, o.args);
    const parts = await comm.gatherBytes(new Uint8Array(serialize(value) as unknown as ArrayBuffer), 0);
    await comm.close();
    return parts ? parts.map((p) => deserialize(p.buffer as ArrayBuffer) as R) : null;
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    let code = 1;
    try {
      code = o.onError ? o.onError(err, comm.rank) : defaultOnError(err, comm.rank);
    } finally {
      comm.abort(code);
    }
    return null; // not reached: abort ends the process
  }
}

function defaultOnError(e: Error, rank: number): number {
  process.stderr.write(`rank ${rank} failed: ${e.stack ?? e.message}\n`);
  return 1;
}

/** Script body: `bun mpi-rank.ts <entry URL> <args file> <out dir>` (started by launchMpi). */
async function scriptMain(argv: string[]): Promise<void> {
  const [entry, argsFile, outDir] = argv;
  if (!entry || !argsFile || !outDir) {
    console.error("usage: mpirun … bun core/src/launch/mpi-rank.ts <entry URL> <args file> <out dir>");
    process.exit(2);
  }
  const args = deserialize(readFileSync(argsFile).buffer as ArrayBuffer);
  const timeoutS = process.env.ZEROMOE_COMM_TIMEOUT_S ? Number(process.env.ZEROMOE_COMM_TIMEOUT_S) : undefined;
  const results = await runMpiRank({
    entry,
    args,
    timeoutS,
    onError: (e, rank) => {
      const rec: MpiRankError = { rank, name: e.name, message: e.message, stack: e.stack ?? String(e), aborted: e instanceof CommAbortedError };
      try {
        writeFileSync(join(outDir, `error-${rank}.bin`), new Uint8Array(serialize(rec) as unknown as ArrayBuffer));
      } catch {
        /* the message below still names the rank */
      }
      return defaultOnError(e, rank);
    },
  });
  if (results) writeFileSync(join(outDir, "results.bin"), new Uint8Array(serialize(results) as unknown as ArrayBuffer));
}

if (import.meta.main) {
  await scriptMain(process.argv.slice(2));
  process.exit(0);
}
