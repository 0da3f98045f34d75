/**
 * A rank's communicator whose collectives run on a progress thread (docs/comm.md "Progress
 * threads"): the rank's thread issues a collective — argument checks, output allocation and the
 * place in the order happen here, at once (checked-communicator.ts) — stages its arrays into
 * shared memory (staging.ts) and posts it to the thread; the thread runs the transport's data
 * movement (the in-thread `local` or `mpi` communicator, progress-worker.ts) while the rank's
 * thread computes; the handle completes when the thread reports back and the outputs have been
 * copied home. The thread runs collectives in the order they were posted, which is the issue order,
 * so ranks agree on the order without waiting for each other in program order.
 */

import type { CallHeader } from "../call-header.ts";
import { CheckedCommunicator, type AllToAllVCall } from "../checked-communicator.ts";
import type { CollectiveName, CommArray, Group, ReduceOptions } from "../communicator.ts";
import { groupRanks, MemberGroup } from "../group-ranks.ts";
import { registerGroup } from "../local/group-sync.ts";
import type { LocalWorldMemory } from "../local/memory.ts";
import type { TransportOptions } from "../transport-options.ts";
import { startProgressThread, type ProgressThread, type ThreadMessage } from "./progress-thread.ts";
import { StagingPool, type StageEntry } from "./staging.ts";
import { fromWireError } from "./wire-errors.ts";
import type { CallMessage, FromThread, MoverSpec, ToThread } from "./wire.ts";
import { sleepSync } from "@zeromoe/kernels/runtime";

const WORKER_URL = new URL("./progress-worker.ts", import.meta.url);

/** A call waiting for its thread's answer. */
interface Pending {
  resolve(value: unknown): void;
  reject(e: Error): void;
}

/** The communicator on the rank's side of a progress thread (see the file comment). */
export class ThreadedCommunicator extends CheckedCommunicator<MemberGroup> {
  readonly transport: string;
  readonly world: Group;
  private readonly thread: ProgressThread;
  private readonly pending = new Map<number, Pending>();
  private readonly pool = new StagingPool();
  private seq = 0;
  /** Set once the thread has died or the communicator was closed: later calls fail with it. */
  private dead: Error | null = null;

  private constructor(
    spec: MoverSpec,
    readonly rank: number,
    readonly worldSize: number,
    thread: ProgressThread,
    private readonly onNewGroup: (ranks: readonly number[]) => void,
  ) {
    super();
    this.transport = spec.kind;
    this.thread = thread;
    this.world = this.newGroup(
      Array.from({ length: worldSize }, (_, i) => i),
      "world",
    );
  }

  /**
   * Rank `rank` of a `local` job on `mem`, its collectives on a progress thread. Every rank of the
   * job constructs exactly one (as {@link LocalCommunicator}). Throws when `rank` is out of range.
   */
  static local(mem: LocalWorldMemory, rank: number, opts: TransportOptions = {}): ThreadedCommunicator {
    if (!Number.isInteger(rank) || rank < 0 || rank >= mem.worldSize) {
      throw new Error(`local comm: rank ${rank} out of range [0, ${mem.worldSize})`);
    }
    const spec: MoverSpec = { kind: "local", mem, rank, opts };
    const ctl = new Int32Array(mem.control);
    let c: ThreadedCommunicator | null = null;
    const thread = startProgressThread(WORKER_URL, (m) => c!.onMessage(m), (e) => c!.onThreadError(e));
    thread.post({ type: "init", spec } satisfies ToThread);
    c = new ThreadedCommunicator(spec, rank, mem.worldSize, thread, (ranks) => registerGroup(ctl, mem.worldSize, ranks));
    return c;
  }

  /**
   * This process's rank of an `mpi` job, MPI initialised and driven by its progress thread.
   * Rejects when Open MPI cannot be loaded or initialised there.
   */
  static async mpi(opts: TransportOptions = {}): Promise<ThreadedCommunicator> {
    const spec: MoverSpec = { kind: "mpi", opts };
    let c: ThreadedCommunicator | null = null;
    let ready: ((m: FromThread) => void) | null = null;
    const first = new Promise<FromThread>((r) => (ready = r));
    const thread = startProgressThread(
      WORKER_URL,
      (m) => (c ? c.onMessage(m) : ready!(m as unknown as FromThread)),
      (e) => (c ? c.onThreadError(e) : ready!({ type: "init_failed", error: { name: e.name, message: e.message, stack: e.stack ?? "", fields: {} } })),
    );
    thread.keepAlive(true);
    thread.post({ type: "init", spec } satisfies ToThread);
    const m = await first;
    thread.keepAlive(false);
    if (m.type !== "ready") {
      thread.terminate();
      throw m.type === "init_failed" ? fromWireError(m.error) : new Error(`mpi transport: unexpected first message ${m.type}`);
    }
    c = new ThreadedCommunicator(spec, m.rank, m.worldSize, thread, () => {});
    return c;
  }

  newGroup(ranks: readonly number[], name?: string): Group {
    const { sorted, me, name: groupName } = groupRanks(ranks, name, this.rank, this.worldSize);
    this.onNewGroup(sorted);
    return new MemberGroup(this, sorted, me, groupName);
  }

  /**
   * Gather one byte string per rank to world rank `root` (the mpi launcher's results; not a
   * counted collective). Resolves with the strings in rank order at the root, null elsewhere.
   */
  gatherBytes(bytes: Uint8Array, root = 0): Promise<Uint8Array[] | null> {
    return this.request({ type: "gather_bytes", seq: this.seq++, bytes, root }) as Promise<Uint8Array[] | null>;
  }

  /**
   * Wait for every collective issued so far, leave the transport (MPI_Finalize on mpi) and end the
   * progress thread. Collectives issued afterwards fail.
   */
  async close(): Promise<void> {
    if (this.dead) return;
    try {
      await this.request({ type: "close", seq: this.seq++ });
    } finally {
      this.dead ??= new Error(`${this.transport} comm (rank ${this.rank}): the communicator was closed`);
      this.thread.terminate();
    }
  }

  /** End the progress thread now, abandoning what it runs (a failed rank's teardown); pending
   * handles reject. */
  terminate(): void {
    if (!this.dead) this.onThreadError(new Error("the communicator was terminated"));
    this.thread.terminate();
  }

  /** End the whole job now (mpi: MPI_Abort from the progress thread; mpirun kills every rank and
   * exits with `code`). Ends this process with `code` if that has not happened within 3 s. */
  abort(code: number): never {
    this.thread.post({ type: "abort", code } satisfies ToThread);
    sleepSync(3000);
    process.exit(code);
  }

  // ---- the thread ---------------------------------------------------------------------------

  private request(msg: ToThread & { seq: number }): Promise<unknown> {
    if (this.dead) return Promise.reject(this.dead);
    return new Promise((resolve, reject) => {
      this.pending.set(msg.seq, { resolve, reject });
      this.thread.keepAlive(true);
      this.thread.post(msg as unknown as ThreadMessage);
    });
  }

  private onMessage(raw: ThreadMessage): void {
    const m = raw as unknown as FromThread;
    if (m.type !== "done" && m.type !== "failed") return;
    const p = this.pending.get(m.seq);
    if (!p) return;
    this.pending.delete(m.seq);
    if (this.pending.size === 0) this.thread.keepAlive(false);
    if (m.type === "done") p.resolve(m.value);
    else p.reject(fromWireError(m.error));
  }

  private onThreadError(e: Error): void {
    const err = new Error(`${this.transport} comm (rank ${this.rank}): the progress thread failed: ${e.message}`);
    this.dead = err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    this.thread.keepAlive(false);
  }

  /** Stage `entries`, post the call, and settle when the thread has run it and the outputs are home. */
  private post(op: CollectiveName, g: MemberGroup, entries: StageEntry[], extra: Partial<CallMessage> = {}): Promise<void> {
    if (this.dead) return Promise.reject(this.dead);
    const staged = this.pool.stage(entries);
    const msg: CallMessage = { type: "call", seq: this.seq++, op, group: { ranks: g.ranks, name: g.name }, arrays: staged.views, ...extra };
    return this.request(msg).then(
      () => staged.finish(),
      (e: unknown) => {
        staged.release();
        throw e;
      },
    );
  }

  // ---- data movement: on the thread ----------------------------------------------------------

  protected moveAllReduce<T extends CommArray>(g: MemberGroup, data: T, _h: CallHeader, opts: ReduceOptions | undefined): Promise<void> {
    return this.post("all_reduce", g, [{ array: data, copyIn: true, copyOutElems: data.length }], { reduce: reduceOf(opts) });
  }

  protected moveReduceScatter<T extends CommArray>(g: MemberGroup, input: T, out: T, _h: CallHeader, opts: ReduceOptions | undefined): Promise<void> {
    return this.post(
      "reduce_scatter",
      g,
      [
        { array: input, copyIn: true, copyOutElems: 0 },
        { array: out, copyIn: false, copyOutElems: out.length },
      ],
      { reduce: reduceOf(opts) },
    );
  }

  protected moveAllGather<T extends CommArray>(g: MemberGroup, input: T, out: T, _h: CallHeader): Promise<void> {
    return this.post("all_gather", g, [
      { array: input, copyIn: true, copyOutElems: 0 },
      { array: out, copyIn: false, copyOutElems: out.length },
    ]);
  }

  protected moveAllToAllV<T extends CommArray>(g: MemberGroup, call: AllToAllVCall<T>, _h: CallHeader): Promise<void> {
    const n = g.size;
    return this.post(
      "all_to_all_v",
      g,
      [
        { array: call.send, copyIn: true, copyOutElems: 0 },
        { array: call.out, copyIn: false, copyOutElems: call.rdispl[n]! },
      ],
      { sendCounts: call.sendCounts, recvCounts: call.recvCounts },
    );
  }

  protected moveBroadcast<T extends CommArray>(g: MemberGroup, data: T, root: number, _rootIdx: number, _h: CallHeader): Promise<void> {
    return this.post("broadcast", g, [{ array: data, copyIn: true, copyOutElems: data.length }], { root });
  }

  protected moveGather<T extends CommArray>(g: MemberGroup, input: T, root: number, _rootIdx: number, out: T | null, _h: CallHeader): Promise<void> {
    return this.post(
      "gather",
      g,
      [
        { array: input, copyIn: true, copyOutElems: 0 },
        { array: out, copyIn: false, copyOutElems: out?.length ?? 0 },
      ],
      { root },
    );
  }

  protected moveScatter<T extends CommArray>(g: MemberGroup, input: T | null, output: T, root: number, _rootIdx: number, _h: CallHeader): Promise<void> {
    return this.post(
      "scatter",
      g,
      [
        { array: input, copyIn: true, copyOutElems: 0 },
        { array: output, copyIn: false, copyOutElems: output.length },
      ],
      { root },
    );
  }

  protected moveBarrier(g: MemberGroup, _h: CallHeader): Promise<void> {
    return this.post("barrier", g, []);
  }
}

function reduceOf(opts: ReduceOptions | undefined): CallMessage["reduce"] {
  return { op: opts?.op, average: opts?.average, half: opts?.half };
}
