/**
 * The frame every transport's collectives share (communicator.ts contract; docs/comm.md): fix the
 * collective's place in the rank's order at issue, find the group, check the arguments
 * (collective-args.ts), build the call header the members compare, time the call and count its
 * nominal bytes (stats.ts), and hand back a {@link Work} handle. A transport extends this class
 * with only what moves the data: one protected `move*` method per collective, called after every
 * local check has passed, which exchanges the header with the group (arrival and agreement) and
 * then the data, throwing the transport's errors (timeout, abort, mismatch). A `move*` either does
 * it all before returning (an in-thread transport: the handle is complete when the call returns)
 * or returns a promise that settles when its progress thread has done it (progress/).
 *
 * Order: collectives are started (their `move*` called) strictly in issue order. A call whose
 * inputs are all present and with nothing waiting ahead of it starts at once, inside the issuing
 * call; one given a promised input, or issued behind one, starts when the input has arrived and
 * everything issued before it has started.
 */

import { OP_CODES, dtypeCode, type CallHeader } from "./call-header.ts";
import {
  allGatherOutput,
  allToAllVLayout,
  checkScatterInput,
  gatherOutput,
  reduceFlags,
  reduceScatterOutput,
  rootIndex,
  validateReduce,
  type ArrayCtor,
} from "./collective-args.ts";
import type { Awaitable, CollectiveName, CollectiveOptions, CommArray, Communicator, Group, OpStats, ReduceOptions, Work } from "./communicator.ts";
import { CommWork } from "./work.ts";
import { callGroup, type MemberGroup } from "./group-ranks.ts";
import {
  allToAllVSentBytes,
  broadcastSentBytes,
  CommStats,
  gatherSentBytes,
  ringAllReduceBytes,
  ringShardBytes,
  scatterSentBytes,
} from "./stats.ts";

/** One all_to_all_v call with its locally checked layout (communicator.ts `allToAllV`). */
export interface AllToAllVCall<T extends CommArray> {
  send: T;
  sendCounts: readonly number[];
  recvCounts: readonly number[];
  /** The receive array (the caller's `recv` or a new one), at least Σ recvCounts elements. */
  out: T;
  /** Element offsets of each member's part in `send` / `out` (exclusive prefix sums, length n + 1). */
  sdispl: readonly number[];
  rdispl: readonly number[];
  /** `all_to_all_v on group <name> (rank <r>)`, the prefix of this call's messages. */
  where: string;
}

/** What a `move*` returns: nothing when the data has moved, or the promise of its completion. */
export type Movement = void | Promise<void>;

/** A collective ready to start: its data movement, its result and its nominal bytes sent. */
interface Prepared<R> {
  move(): Movement;
  result: R;
  bytes: number;
}

function isThenable(x: unknown): x is PromiseLike<unknown> {
  return x !== null && typeof x === "object" && typeof (x as { then?: unknown }).then === "function";
}

/** A communicator whose collectives check, time and count themselves; `G` is the transport's group
 * class. Errors thrown before `move*` are plain Errors (argument checks) or TypeErrors (array type),
 * with the messages of collective-args.ts; every error rejects the collective's handle. */
export abstract class CheckedCommunicator<G extends MemberGroup> implements Communicator {
  abstract readonly transport: string;
  abstract readonly rank: number;
  abstract readonly worldSize: number;
  abstract readonly world: Group;
  /** Per-collective counters behind {@link stats}. */
  protected readonly counters = new CommStats();
  /** Settles when every collective issued so far has started; null when none is waiting to. */
  private tail: Promise<void> | null = null;

  abstract newGroup(ranks: readonly number[], name?: string): Group;

  stats(): Record<CollectiveName, OpStats> {
    return this.counters.snapshot();
  }

  resetStats(): void {
    this.counters.reset();
  }

  /** The group collective `op` runs on (opts.group or the world); throws when another communicator made it. */
  protected group(opts: CollectiveOptions | undefined, op: CollectiveName): G {
    return callGroup(opts, this.world as G, this, op);
  }

  // ---- what a transport supplies: the data movement of each collective --------------------------

  /** all_reduce of `data` in place over `g` (options checked; `h` the call header). */
  protected abstract moveAllReduce<T extends CommArray>(g: G, data: T, h: CallHeader, opts: ReduceOptions | undefined): Movement;
  /** reduce_scatter of `input` (n·s elements) into `out` (s elements, may overlap `input`). */
  protected abstract moveReduceScatter<T extends CommArray>(g: G, input: T, out: T, h: CallHeader, opts: ReduceOptions | undefined): Movement;
  /** all_gather of `input` (s elements) into `out` (n·s elements, may overlap `input`). */
  protected abstract moveAllGather<T extends CommArray>(g: G, input: T, out: T, h: CallHeader): Movement;
  /** all_to_all_v of a locally checked call; the transport checks that the members' counts pair up
   * (all-to-all-v-counts.ts) before moving data. */
  protected abstract moveAllToAllV<T extends CommArray>(g: G, call: AllToAllVCall<T>, h: CallHeader): Movement;
  /** broadcast of `data` in place from world rank `root` (member index `rootIdx` of `g`). */
  protected abstract moveBroadcast<T extends CommArray>(g: G, data: T, root: number, rootIdx: number, h: CallHeader): Movement;
  /** gather of `input` to world rank `root`; `out` is the checked output at the root, null elsewhere. */
  protected abstract moveGather<T extends CommArray>(g: G, input: T, root: number, rootIdx: number, out: T | null, h: CallHeader): Movement;
  /** scatter from world rank `root`; `input` is checked at the root (n·s elements), ignored elsewhere. */
  protected abstract moveScatter<T extends CommArray>(g: G, input: T | null, output: T, root: number, rootIdx: number, h: CallHeader): Movement;
  /** Return when every member of `g` has arrived (after checking that all called barrier). */
  protected abstract moveBarrier(g: G, h: CallHeader): Movement;

  // ---- issue order and handles ------------------------------------------------------------------

  /**
   * Issue collective `op`: when `input` (a value or a promise) is present and every earlier
   * collective has started, `prepare` checks the arguments and the movement starts; the handle
   * completes with `prepare`'s result when the movement has. Stats are recorded at completion.
   */
  protected issue<I, R>(op: CollectiveName, input: Awaitable<I>, prepare: (input: I) => Prepared<R>): Work<R> {
    const t0 = performance.now();
    let bytes = 0;
    let work: CommWork<R> | null = null;
    const record = (blockedMs: number) => this.counters.record(op, bytes, performance.now() - t0, blockedMs);
    const handle = (w: CommWork<R>) => {
      work = w;
      w.sentBytes = bytes;
      return w;
    };
    /** Check and start; `moving` is null when the movement finished inside the call. */
    const start = (value: I): { result: R; moving: Promise<void> | null } => {
      const p = prepare(value);
      bytes = p.bytes;
      if (work) work.sentBytes = bytes;
      return { result: p.result, moving: p.move() ?? null };
    };
    if (this.tail === null && !isThenable(input)) {
      // the common case: nothing waiting ahead, input present — start inside this call
      let s: { result: R; moving: Promise<void> | null };
      try {
        s = start(input as I);
      } catch (e) {
        return CommWork.failed(e);
      }
      if (s.moving === null) {
        record(0);
        return handle(CommWork.completed(s.result));
      }
      return handle(new CommWork(
        s.moving.then(() => s.result),
        record,
      ));
    }
    // wait for the input and for every earlier collective to have started, then start this one
    const started = Promise.all([this.tail, input]).then(([, v]) => start(v as I));
    const tail: Promise<void> = started.then(
      () => undefined,
      () => undefined,
    );
    this.tail = tail;
    void tail.then(() => {
      if (this.tail === tail) this.tail = null;
    });
    return handle(new CommWork(
      started.then(async (s) => {
        if (s.moving !== null) await s.moving;
        return s.result;
      }),
      record,
    ));
  }

  // ---- the collectives --------------------------------------------------------------------------

  allReduce<T extends CommArray>(data: Awaitable<T>, opts?: ReduceOptions): Work<T> {
    return this.issue("all_reduce", data, (d: T) => {
      const g = this.group(opts, "all_reduce");
      const dt = dtypeCode(d);
      validateReduce(d, opts, "all_reduce");
      const h = { op: OP_CODES.all_reduce, dtype: dt, length: d.length, root: 0, flags: reduceFlags(opts) };
      return { move: () => this.moveAllReduce(g, d, h, opts), result: d, bytes: ringAllReduceBytes(d.byteLength, g.size) };
    });
  }

  reduceScatter<T extends CommArray>(input: Awaitable<T>, output?: T, opts?: ReduceOptions): Work<T> {
    return this.issue("reduce_scatter", input, (x: T) => {
      const g = this.group(opts, "reduce_scatter");
      const dt = dtypeCode(x);
      validateReduce(x, opts, "reduce_scatter");
      const n = g.size;
      if (x.length % n !== 0) {
        throw new Error(`reduce_scatter on group ${g.name}: input length ${x.length} is not divisible by the group size ${n}`);
      }
      const out = reduceScatterOutput(x, output, n, g.name);
      const h = { op: OP_CODES.reduce_scatter, dtype: dt, length: x.length, root: 0, flags: reduceFlags(opts) };
      return { move: () => this.moveReduceScatter(g, x, out, h, opts), result: out, bytes: ringShardBytes(x.byteLength, n) };
    });
  }

  allGather<T extends CommArray>(input: Awaitable<T>, output?: T, opts?: CollectiveOptions): Work<T> {
    return this.issue("all_gather", input, (x: T) => {
      const g = this.group(opts, "all_gather");
      const dt = dtypeCode(x);
      const out = allGatherOutput(x, output, g.size, g.name);
      const h = { op: OP_CODES.all_gather, dtype: dt, length: x.length, root: 0, flags: 0 };
      return { move: () => this.moveAllGather(g, x, out, h), result: out, bytes: ringShardBytes(out.byteLength, g.size) };
    });
  }

  allToAllV<T extends CommArray>(
    send: T,
    sendCounts: readonly number[],
    recvCounts: readonly number[],
    recv?: T,
    opts?: CollectiveOptions,
  ): Work<T> {
    return this.issue("all_to_all_v", send, (x: T) => {
      const g = this.group(opts, "all_to_all_v");
      const dt = dtypeCode(x);
      const n = g.size;
      const where = `all_to_all_v on group ${g.name} (rank ${this.rank})`;
      const { out, sdispl, rdispl } = allToAllVLayout(x, sendCounts, recvCounts, recv, n, where);
      const bpe = (x.constructor as ArrayCtor).BYTES_PER_ELEMENT;
      const h = { op: OP_CODES.all_to_all_v, dtype: dt, length: 0, root: 0, flags: 0 };
      return {
        move: () => this.moveAllToAllV(g, { send: x, sendCounts, recvCounts, out, sdispl, rdispl, where }, h),
        result: out,
        bytes: allToAllVSentBytes(sdispl[n]!, sendCounts[g.rank]!, bpe),
      };
    });
  }

  broadcast<T extends CommArray>(data: T, root: number, opts?: CollectiveOptions): Work<T> {
    return this.issue("broadcast", data, (d: T) => {
      const g = this.group(opts, "broadcast");
      const dt = dtypeCode(d);
      const rootIdx = rootIndex(g, root, "broadcast");
      const h = { op: OP_CODES.broadcast, dtype: dt, length: d.length, root, flags: 0 };
      return { move: () => this.moveBroadcast(g, d, root, rootIdx, h), result: d, bytes: broadcastSentBytes(d.byteLength, g.size, g.rank === rootIdx) };
    });
  }

  gather<T extends CommArray>(input: T, root: number, output?: T, opts?: CollectiveOptions): Work<T | null> {
    return this.issue("gather", input, (x: T) => {
      const g = this.group(opts, "gather");
      const dt = dtypeCode(x);
      const rootIdx = rootIndex(g, root, "gather");
      const isRoot = g.rank === rootIdx;
      const out = gatherOutput(x, output, g.size, isRoot, g.name);
      const h = { op: OP_CODES.gather, dtype: dt, length: x.length, root, flags: 0 };
      return { move: () => this.moveGather(g, x, root, rootIdx, out, h), result: out, bytes: gatherSentBytes(x.byteLength, isRoot) };
    });
  }

  scatter<T extends CommArray>(input: T | null, output: T, root: number, opts?: CollectiveOptions): Work<T> {
    return this.issue("scatter", input, (x: T | null) => {
      const g = this.group(opts, "scatter");
      const dt = dtypeCode(output);
      const rootIdx = rootIndex(g, root, "scatter");
      const n = g.size;
      const isRoot = g.rank === rootIdx;
      checkScatterInput(x, output, n, isRoot, root, g.name);
      const h = { op: OP_CODES.scatter, dtype: dt, length: output.length, root, flags: 0 };
      return { move: () => this.moveScatter(g, x, output, root, rootIdx, h), result: output, bytes: scatterSentBytes(n * output.byteLength, n, isRoot) };
    });
  }

  barrier(opts?: CollectiveOptions): Work<void> {
    return this.issue("barrier", null, () => {
      const g = this.group(opts, "barrier");
      const h = { op: OP_CODES.barrier, dtype: 0, length: 0, root: 0, flags: 0 };
      return { move: () => this.moveBarrier(g, h), result: undefined, bytes: 0 };
    });
  }
}
