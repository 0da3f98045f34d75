/**
 * Body of one rank's Bun Worker (started by launch.ts): attaches a communicator to the job's shared
 * memory (the `local` transport, its collectives on the rank's progress thread:
 * comm/progress/threaded-communicator.ts), imports the entry module and runs its `default` (or `main`) export as
 * `(comm, rank, worldSize, args)`. The result goes back to the launcher by postMessage; an error
 * first aborts the job in shared memory (so peers blocked in a collective wake at once) and is then
 * reported. Not meant to be imported.
 */

import { parentPort, workerData } from "node:worker_threads";
import { CommAbortedError } from "../comm/errors.ts";
import { ThreadedCommunicator } from "../comm/progress/threaded-communicator.ts";
import { abortWorld, markFinished, type LocalWorldMemory } from "../comm/local/memory.ts";
import type { RankMessage, RankWorkerData } from "./protocol.ts";

const data = workerData as RankWorkerData;
const port = parentPort;
if (!port) throw new Error("rank-worker.ts must run as a worker started by launch()");

function post(msg: RankMessage): void {
  port!.postMessage(msg);
}

async function run(): Promise<void> {
  const mem: LocalWorldMemory = data.mem;
  let comm: ThreadedCommunicator | null = null;
  try {
    comm = ThreadedCommunicator.local(mem, data.rank, { timeoutMs: data.timeoutMs });
    const mod = (await import(data.entry)) as Record<string, unknown>;
    const fn = (mod.default ?? mod.main) as unknown;
    if (typeof fn !== "function") {
      throw new Error(`launch: entry ${data.entry} must export a default function or "main" taking (comm, rank, worldSize, args)`);
    }
    const value = await (fn as (...a: unknown[]) => unknown)(comm, data.rank, data.worldSize, data.args);
    // collectives the entry issued and did not wait for still complete before the rank finishes
    await comm.close();
    markFinished(mem, data.rank);
    post({ type: "result", rank: data.rank, value });
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    if (!(err instanceof CommAbortedError)) abortWorld(mem, data.rank);
    comm?.terminate();
    post({ type: "error", rank: data.rank, name: err.name, message: err.message, stack: err.stack ?? String(err), aborted: err instanceof CommAbortedError });
  }
}

await run();
