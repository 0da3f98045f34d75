/**
 * Body of a rank's progress thread (started by threaded-communicator.ts; not meant to be
 * imported): attaches the in-thread transport named by the init message (local: the job's shared
 * memory; mpi: MPI_Init_thread from this thread, which then makes every MPI call of the rank) and
 * runs the collectives it is sent, one after another in the order they arrive, each to completion
 * on this thread. Completion or failure goes back as a message naming the call's sequence number.
 */

import type { Communicator, Group } from "../communicator.ts";
import { LocalCommunicator } from "../local/local-communicator.ts";
import type { MpiCommunicator } from "../mpi/mpi-communicator.ts";
import { serveProgressThread } from "./progress-thread.ts";
import { toWireError } from "./wire-errors.ts";
import type { CallMessage, FromThread, MoverSpec, ToThread, WireGroup } from "./wire.ts";

let mover: Communicator | null = null;
let mpi: MpiCommunicator | null = null;
const groups = new Map<string, Group>();
let chain: Promise<void> = Promise.resolve();

const send = serveProgressThread((m) => {
  const msg = m as unknown as ToThread;
  if (msg.type === "abort") {
    // not queued: the rank is failing; end the job (mpirun kills the other ranks)
    if (mpi) mpi.abort(msg.code);
    return;
  }
  chain = chain.then(() => handle(msg));
});

function reply(m: FromThread): void {
  send(m as unknown as Record<string, unknown>);
}

async function attach(spec: MoverSpec): Promise<Communicator> {
  if (spec.kind === "local") return new LocalCommunicator(spec.mem, spec.rank, spec.opts);
  const { MpiCommunicator } = await import("../mpi/mpi-communicator.ts");
  mpi = new MpiCommunicator(spec.opts);
  return mpi;
}

function groupOf(c: Communicator, g: WireGroup): Group {
  const key = `${g.ranks.join(",")}|${g.name}`;
  let grp = groups.get(key);
  if (!grp) {
    grp = g.ranks.length === c.worldSize && g.name === "world" ? c.world : c.newGroup(g.ranks, g.name);
    groups.set(key, grp);
  }
  return grp;
}

/** Run one collective on the in-thread transport (complete when its call returns). */
async function run(c: Communicator, m: CallMessage): Promise<void> {
  const group = groupOf(c, m.group);
  const a = m.arrays;
  const ro = { ...m.reduce, group };
  switch (m.op) {
    case "all_reduce":
      await c.allReduce(a[0]!, ro);
      return;
    case "reduce_scatter":
      await c.reduceScatter(a[0]!, a[1]!, ro);
      return;
    case "all_gather":
      await c.allGather(a[0]!, a[1]!, { group });
      return;
    case "all_to_all_v":
      await c.allToAllV(a[0]!, m.sendCounts!, m.recvCounts!, a[1]!, { group });
      return;
    case "broadcast":
      await c.broadcast(a[0]!, m.root!, { group });
      return;
    case "gather":
      await c.gather(a[0]!, m.root!, a[1] ?? undefined, { group });
      return;
    case "scatter":
      await c.scatter(a[0], a[1]!, m.root!, { group });
      return;
    case "barrier":
      await c.barrier({ group });
      return;
  }
}

async function handle(msg: ToThread): Promise<void> {
  if (msg.type === "init") {
    try {
      mover = await attach(msg.spec);
      reply({ type: "ready", rank: mover.rank, worldSize: mover.worldSize });
    } catch (e) {
      reply({ type: "init_failed", error: toWireError(e) });
    }
    return;
  }
  if (msg.type === "abort") return;
  const seq = msg.seq;
  try {
    if (!mover) throw new Error("progress thread: a call before the transport was attached");
    if (msg.type === "call") {
      await run(mover, msg);
      reply({ type: "done", seq });
    } else if (msg.type === "gather_bytes") {
      if (!mpi) throw new Error("gatherBytes is the mpi transport's");
      reply({ type: "done", seq, value: await mpi.gatherBytes(msg.bytes, msg.root) });
    } else if (msg.type === "close") {
      mpi?.finalize();
      reply({ type: "done", seq });
    }
  } catch (e) {
    reply({ type: "failed", seq, error: toWireError(e) });
  }
}
