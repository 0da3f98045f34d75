/**
 * A communicator for plugin tests that records the interleaving of collectives with the caller's
 * own events, and lets a test choose when collectives complete or make one fail. It is one rank of
 * a simulated world of `worldSize` ranks whose peers are *mirrors*: every peer contributes exactly
 * what this rank contributes (all_gather repeats the input n times; a sum over n mirrored arrays is
 * n·x; average and max give x; all_to_all_v delivers, from every peer, what this rank sends to
 * itself; broadcast and scatter keep the root's data, which is this rank's). Values are therefore
 * exact but only meaningful for mirrored inputs; the point is the order of events.
 *
 * Built on the real frame (checked-communicator.ts): argument checks, issue order, promised
 * inputs, handles and stats behave as on the launched transports. Events, in `events`:
 * `issue` when a collective is called, `start` when its data moves (its input present and every
 * earlier collective started), `complete` / `fail` when its handle settles; `mark(label)` adds the
 * test's own events (e.g. "compute u3") to the same list.
 *
 * Completion (`completion` option): "sync" completes inside the issuing call (an in-thread
 * transport); "deferred" (default) completes on a later macrotask, so a collective issued before
 * synchronous compute is still in flight while it runs (a transport with a progress thread).
 */

import type { CallHeader } from "../comm/call-header.ts";
import { CheckedCommunicator, type AllToAllVCall, type Movement } from "../comm/checked-communicator.ts";
import type { Awaitable, CollectiveName, CommArray, Group, ReduceOptions, Work } from "../comm/communicator.ts";
import { reduceSettings } from "../comm/collective-args.ts";
import { groupRanks, MemberGroup } from "../comm/group-ranks.ts";

/** One recorded event. `seq` numbers collectives in issue order (−1 for marks). */
export interface CommEvent {
  what: "issue" | "start" | "complete" | "fail" | "mark";
  op: CollectiveName | "mark";
  seq: number;
  /** start: elements of the collective's input (0 for barrier); mark: 0. */
  length: number;
  /** start: the group's name; mark: the label. */
  label: string;
}

/** Options of a {@link RecordingCommunicator}. */
export interface RecordingOptions {
  /** Ranks in the simulated world (≥ 1). */
  worldSize: number;
  /** This rank (default 0). */
  rank?: number;
  /** When collectives complete (see the file comment); default "deferred". */
  completion?: "sync" | "deferred";
  /** "deferred" only: each collective completes this many milliseconds after it starts (a
   * simulated wire time, for benchmarks of overlap; default 0: the next macrotask). A timer's
   * deadline passes while the caller computes, so a collective started before synchronous compute
   * of at least this long is complete when the compute ends. */
  delayMs?: number;
}

/** See the file comment. */
export class RecordingCommunicator extends CheckedCommunicator<MemberGroup> {
  readonly transport = "recording";
  readonly rank: number;
  readonly worldSize: number;
  readonly world: Group;
  /** Everything recorded, in order. */
  readonly events: CommEvent[] = [];
  private readonly completion: "sync" | "deferred";
  private readonly delayMs: number;
  private nextSeq = 0;
  /** seq of the collective whose movement is being started (set by `issue`'s prepare). */
  private starting = -1;
  private failures: { when: (op: CollectiveName, seq: number) => boolean; error: Error }[] = [];

  constructor(o: RecordingOptions) {
    super();
    if (!Number.isInteger(o.worldSize) || o.worldSize < 1) throw new Error(`RecordingCommunicator: worldSize must be an integer ≥ 1, got ${o.worldSize}`);
    this.worldSize = o.worldSize;
    this.rank = o.rank ?? 0;
    this.completion = o.completion ?? "deferred";
    this.delayMs = o.delayMs ?? 0;
    this.world = this.newGroup(
      Array.from({ length: this.worldSize }, (_, i) => i),
      "world",
    );
  }

  newGroup(ranks: readonly number[], name?: string): Group {
    const { sorted, me, name: n } = groupRanks(ranks, name, this.rank, this.worldSize);
    return new MemberGroup(this, sorted, me, n);
  }

  /** Record a caller event (e.g. `compute u3`) between the collectives' events. */
  mark(label: string): void {
    this.events.push({ what: "mark", op: "mark", seq: -1, length: 0, label });
  }

  /** Make every later collective for which `when(op, seq)` holds fail with `error` (in its data
   * movement, as a transport's timeout or mismatch would), once per matching collective. */
  failWhen(when: (op: CollectiveName, seq: number) => boolean, error: Error): void {
    this.failures.push({ when, error });
  }

  /** Handles not yet completed, by seq. */
  inFlight(): number[] {
    const done = new Set(this.events.filter((e) => e.what === "complete" || e.what === "fail").map((e) => e.seq));
    return this.events.filter((e) => e.what === "issue" && !done.has(e.seq)).map((e) => e.seq);
  }

  protected override issue<I, R>(op: CollectiveName, input: Awaitable<I>, prepare: (input: I) => { move(): Movement; result: R; bytes: number }): Work<R> {
    const seq = this.nextSeq++;
    this.events.push({ what: "issue", op, seq, length: 0, label: "" });
    const w = super.issue(op, input, (v: I) => {
      this.starting = seq;
      return prepare(v);
    });
    w.wait().then(
      () => this.events.push({ what: "complete", op, seq, length: 0, label: "" }),
      () => this.events.push({ what: "fail", op, seq, length: 0, label: "" }),
    );
    return w;
  }

  /** Record the start, run `data` (the mirrored result), and complete now or later. */
  private moved(op: CollectiveName, g: MemberGroup, length: number, data: () => void): Movement {
    const seq = this.starting;
    this.events.push({ what: "start", op, seq, length, label: g.name });
    const f = this.failures.find((x) => x.when(op, seq));
    if (f) this.failures.splice(this.failures.indexOf(f), 1);
    if (this.completion === "sync") {
      if (f) throw f.error;
      data();
      return;
    }
    return new Promise<void>((resolve, reject) =>
      setTimeout(() => {
        if (f) return reject(f.error);
        data();
        resolve();
      }, this.delayMs),
    );
  }

  protected moveAllReduce<T extends CommArray>(g: MemberGroup, data: T, _h: CallHeader, opts: ReduceOptions | undefined): Movement {
    return this.moved("all_reduce", g, data.length, () => scaleSum(data, g.size, opts));
  }

  protected moveReduceScatter<T extends CommArray>(g: MemberGroup, input: T, out: T, _h: CallHeader, opts: ReduceOptions | undefined): Movement {
    return this.moved("reduce_scatter", g, input.length, () => {
      const s = out.length;
      out.set(input.slice(g.rank * s, (g.rank + 1) * s) as T);
      scaleSum(out, g.size, opts);
    });
  }

  protected moveAllGather<T extends CommArray>(g: MemberGroup, input: T, out: T, _h: CallHeader): Movement {
    return this.moved("all_gather", g, input.length, () => {
      const x = input.slice();
      for (let k = 0; k < g.size; k++) out.set(x as T, k * x.length);
    });
  }

  protected moveAllToAllV<T extends CommArray>(g: MemberGroup, c: AllToAllVCall<T>, _h: CallHeader): Movement {
    return this.moved("all_to_all_v", g, c.send.length, () => {
      const me = g.rank;
      const own = c.send.slice(c.sdispl[me]!, c.sdispl[me]! + c.sendCounts[me]!);
      for (let i = 0; i < g.size; i++) c.out.set(own.subarray(0, Math.min(own.length, c.recvCounts[i]!)) as T, c.rdispl[i]!);
    });
  }

  protected moveBroadcast<T extends CommArray>(g: MemberGroup, data: T, _root: number, _rootIdx: number, _h: CallHeader): Movement {
    return this.moved("broadcast", g, data.length, () => {});
  }

  protected moveGather<T extends CommArray>(g: MemberGroup, input: T, _root: number, _rootIdx: number, out: T | null, _h: CallHeader): Movement {
    return this.moved("gather", g, input.length, () => {
      if (out) for (let k = 0; k < g.size; k++) out.set(input as T, k * input.length);
    });
  }

  protected moveScatter<T extends CommArray>(g: MemberGroup, input: T | null, output: T, _root: number, rootIdx: number, _h: CallHeader): Movement {
    return this.moved("scatter", g, output.length, () => {
      if (g.rank === rootIdx && input) output.set(input.subarray(g.rank * output.length, (g.rank + 1) * output.length) as T);
    });
  }

  protected moveBarrier(g: MemberGroup, _h: CallHeader): Movement {
    return this.moved("barrier", g, 0, () => {});
  }
}

/** The reduction of n mirrored copies of `x`, in place: sum → n·x (integer and float arrays;
 * 16-bit floats are left as they are), average and max → x. */
function scaleSum(x: CommArray, n: number, opts: ReduceOptions | undefined): void {
  const { op, average } = reduceSettings(opts);
  if (op !== "sum" || average || x instanceof Uint16Array) return;
  for (let i = 0; i < x.length; i++) x[i] = (x[i] as number) * n;
}
