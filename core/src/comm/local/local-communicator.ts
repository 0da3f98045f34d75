/**
 * The `local` transport: ranks are threads (Bun Workers) of one process sharing a
 * {@link LocalWorldMemory}. Every collective moves data through each rank's fixed-size arena slot
 * in chunks: a rank writes its contribution into its own slot, the group meets at a barrier, each
 * rank reads what it needs from its peers' slots, and the group meets again before slots are
 * reused. A large array takes ⌈bytes / slot⌉ rounds; nothing is allocated per call besides the
 * output arrays a caller asks for.
 *
 * all_reduce is a shared-memory reduce-scatter + all-gather inside each chunk: member k reduces the
 * k-th segment of the chunk over all slots in group order and publishes it; then everyone copies the
 * other segments. reduce_scatter reduces exactly the same way, so the two agree bit for bit.
 *
 * The collectives run synchronously on the calling thread (blocking in Atomics.wait at barriers)
 * and return resolved/rejected promises. Argument agreement is checked at the first barrier of
 * every call through per-rank headers (op, dtype, length, root, flags). Each rank's own argument
 * checks, the header's contents, timing and byte accounting are ../checked-communicator.ts's; this
 * file moves the data.
 */

import type { CollectiveName, CommArray, Group, ReduceOptions } from "../communicator.ts";
import { checkCountRows, packCountRow } from "../all-to-all-v-counts.ts";
import { CallTrace, callMismatchError, type CallHeader } from "../call-header.ts";
import { CheckedCommunicator, type AllToAllVCall } from "../checked-communicator.ts";
import { reduceSettings, sharesBytes, type ArrayCtor } from "../collective-args.ts";
import { groupRanks, MemberGroup } from "../group-ranks.ts";
import { reduceInto } from "../reduce.ts";
import { resolveTransportOptions, type TransportOptions } from "../transport-options.ts";
import { GroupSync, registerGroup } from "./group-sync.ts";
import { describeHeaderMismatch, writeCallHeader } from "./call-header.ts";
import { controlLayout, type LocalWorldMemory } from "./memory.ts";

/** Options of a local communicator (timeout: the longest wait at any barrier). */
export type LocalCommOptions = TransportOptions;

/** Chunks of at most min(this, slot elements / 16) elements are all-reduced by every member in
 * full (2 barriers) instead of segment by segment (3 barriers). */
const SMALL_ALL_REDUCE = 4096;

/** A group with the barrier state of its rank set (shared by every group of the same ranks). */
class LocalGroup extends MemberGroup {
  constructor(owner: LocalCommunicator, ranks: readonly number[], rank: number, name: string, readonly sync: GroupSync) {
    super(owner, ranks, rank, name);
  }
}

/** A rank's communicator on the `local` (shared-memory, Bun Workers) transport. */
export class LocalCommunicator extends CheckedCommunicator<LocalGroup> {
  readonly transport = "local";
  readonly worldSize: number;
  readonly world: Group;
  private readonly ctl: Int32Array;
  private readonly syncs = new Map<number, GroupSync>();
  private readonly timeoutMs: number;
  private readonly tracer: CallTrace;

  /**
   * Attach rank `rank` to the job memory `mem`. Every rank of the job must construct exactly one
   * communicator on the same memory. Throws when `rank` is out of range.
   */
  constructor(
    private readonly mem: LocalWorldMemory,
    readonly rank: number,
    opts: LocalCommOptions = {},
  ) {
    super();
    if (!Number.isInteger(rank) || rank < 0 || rank >= mem.worldSize) {
      throw new Error(`local comm: rank ${rank} out of range [0, ${mem.worldSize})`);
    }
    this.worldSize = mem.worldSize;
    this.ctl = new Int32Array(mem.control);
    const { timeoutMs, trace } = resolveTransportOptions(opts);
    this.timeoutMs = timeoutMs;
    this.tracer = new CallTrace(rank, trace);
    this.world = this.newGroup(
      Array.from({ length: this.worldSize }, (_, i) => i),
      "world",
    );
  }

  newGroup(ranks: readonly number[], name?: string): Group {
    const { sorted, me, name: groupName } = groupRanks(ranks, name, this.rank, this.worldSize);
    const entry = registerGroup(this.ctl, this.worldSize, sorted);
    let sync = this.syncs.get(entry);
    if (!sync) {
      sync = new GroupSync(this.ctl, entry, sorted, this.rank, controlLayout(this.worldSize));
      this.syncs.set(entry, sync);
    }
    return new LocalGroup(this, sorted, me, groupName, sync);
  }

  // ---- helpers ------------------------------------------------------------------------------

  /** A view of `len` elements of world rank `r`'s slot, starting at element `off`. */
  private slot(r: number, ctor: ArrayCtor, off: number, len: number): CommArray {
    return new ctor(this.mem.arena, r * this.mem.slotBytes + off * ctor.BYTES_PER_ELEMENT, len);
  }

  private slotElems(ctor: ArrayCtor): number {
    return Math.floor(this.mem.slotBytes / ctor.BYTES_PER_ELEMENT);
  }

  private writeHeader(g: LocalGroup, h: CallHeader): void {
    writeCallHeader(this.ctl, this.rank, h);
    this.tracer.note(h, g.name);
  }

  private barrierOf(g: LocalGroup, op: CollectiveName): void {
    g.sync.arriveAndWait(op, g.name, this.timeoutMs);
  }

  /** After the first barrier: compare every member's call header. On a mismatch every member sees
   * the same table, meets once more (so no slot is still being read) and throws the same error. */
  private checkHeaders(g: LocalGroup, op: CollectiveName): void {
    const problem = describeHeaderMismatch(this.ctl, g.ranks);
    if (problem === null) return;
    this.barrierOf(g, op);
    throw callMismatchError(op, g.name, this.rank, problem);
  }

  // ---- data movement of each collective (checks, header, stats: ../checked-communicator.ts) ----

  protected moveAllReduce<T extends CommArray>(g: LocalGroup, data: T, h: CallHeader, opts: ReduceOptions | undefined): void {
    const n = g.size;
    const ctor = data.constructor as ArrayCtor;
    const cap = this.slotElems(ctor);
    const len = data.length;
    const { op, average, half } = reduceSettings(opts);
    this.writeHeader(g, h);
    const small = Math.min(SMALL_ALL_REDUCE, Math.floor(cap / 16));
    const chunks = Math.max(1, Math.ceil(len / cap));
    for (let ch = 0; ch < chunks; ch++) {
      const o = ch * cap;
      const c = Math.min(cap, len - o);
      const mine = this.slot(this.rank, ctor, 0, c);
      if (c <= small) {
        // Small: every member reduces the whole chunk itself (same operations per element, so the
        // same bits), saving one barrier.
        mine.set(data.subarray(o, o + c));
        this.barrierOf(g, "all_reduce");
        if (ch === 0) this.checkHeaders(g, "all_reduce");
        reduceInto(data, o, g.ranks.map((r) => this.slot(r, ctor, 0, c)), c, op, average, n, half);
        this.barrierOf(g, "all_reduce");
        continue;
      }
      // Only the segments the peers reduce go into the slot; this member reads its own segment
      // straight from `data` and writes the reduced segment into the hole that leaves in its slot,
      // where the peers copy it from (one copy of c/n elements less per chunk than copying the
      // whole chunk in and publishing the result afterwards; the same operations per element).
      const s0 = Math.floor((c * g.rank) / n);
      const s1 = Math.floor((c * (g.rank + 1)) / n);
      if (s0 > 0) mine.set(data.subarray(o, o + s0));
      if (s1 < c) mine.set(data.subarray(o + s1, o + c), s1);
      this.barrierOf(g, "all_reduce");
      if (ch === 0) this.checkHeaders(g, "all_reduce");
      const srcs = g.ranks.map((r, j) => (j === g.rank ? data.subarray(o + s0, o + s1) : this.slot(r, ctor, s0, s1 - s0)));
      reduceInto(mine, s0, srcs, s1 - s0, op, average, n, half);
      data.set(mine.subarray(s0, s1) as T, o + s0);
      this.barrierOf(g, "all_reduce");
      for (let j = 0; j < n; j++) {
        if (j === g.rank) continue;
        const j0 = Math.floor((c * j) / n);
        const j1 = Math.floor((c * (j + 1)) / n);
        data.set(this.slot(g.ranks[j], ctor, j0, j1 - j0) as T, o + j0);
      }
      this.barrierOf(g, "all_reduce");
    }
  }

  protected moveReduceScatter<T extends CommArray>(g: LocalGroup, input: T, out: T, h: CallHeader, opts: ReduceOptions | undefined): void {
    const n = g.size;
    const ctor = input.constructor as ArrayCtor;
    const s = input.length / n;
    const { op, average, half } = reduceSettings(opts);
    const cap = Math.floor(this.slotElems(ctor) / n);
    this.writeHeader(g, h);
    const chunks = Math.max(1, Math.ceil(s / cap));
    const ownInSlot = sharesBytes(out, input);
    for (let ch = 0; ch < chunks; ch++) {
      const o = ch * cap;
      const c = Math.min(cap, s - o);
      const mine = this.slot(this.rank, ctor, 0, n * c);
      // this member's own part is read from `input` directly, not copied in (unless `out` overlaps
      // `input`, e.g. an in-place reduce_scatter, where reduceInto could overwrite it mid-read)
      for (let k = 0; k < n; k++) if (k !== g.rank || ownInSlot) mine.set(input.subarray(k * s + o, k * s + o + c), k * c);
      this.barrierOf(g, "reduce_scatter");
      if (ch === 0) this.checkHeaders(g, "reduce_scatter");
      const ownAt = g.rank * s + o;
      const srcs = g.ranks.map((r, j) => (j === g.rank && !ownInSlot ? input.subarray(ownAt, ownAt + c) : this.slot(r, ctor, g.rank * c, c)));
      reduceInto(out, o, srcs, c, op, average, n, half);
      this.barrierOf(g, "reduce_scatter");
    }
  }

  protected moveAllGather<T extends CommArray>(g: LocalGroup, input: T, out: T, h: CallHeader): void {
    const n = g.size;
    const ctor = input.constructor as ArrayCtor;
    const s = input.length;
    const cap = this.slotElems(ctor);
    this.writeHeader(g, h);
    const chunks = Math.max(1, Math.ceil(s / cap));
    for (let ch = 0; ch < chunks; ch++) {
      const o = ch * cap;
      const c = Math.min(cap, s - o);
      this.slot(this.rank, ctor, 0, c).set(input.subarray(o, o + c));
      this.barrierOf(g, "all_gather");
      if (ch === 0) this.checkHeaders(g, "all_gather");
      for (let j = 0; j < n; j++) {
        const src = j === g.rank ? input.subarray(o, o + c) : this.slot(g.ranks[j], ctor, 0, c);
        out.set(src as T, j * s + o);
      }
      this.barrierOf(g, "all_gather");
    }
  }

  protected moveAllToAllV<T extends CommArray>(g: LocalGroup, call: AllToAllVCall<T>, h: CallHeader): void {
    const { send, sendCounts, recvCounts, out, sdispl, rdispl, where } = call;
    const n = g.size;
    const ctor = send.constructor as ArrayCtor;
    // Phase 1: exchange the counts (as Float64, exact up to 2^53) and validate the whole matrix.
    this.writeHeader(g, h);
    packCountRow(this.slot(this.rank, Float64Array, 0, 2 * n) as Float64Array, sendCounts, recvCounts);
    this.barrierOf(g, "all_to_all_v");
    this.checkHeaders(g, "all_to_all_v");
    const rows = g.ranks.map((r) => this.slot(r, Float64Array, 0, 2 * n) as Float64Array);
    const { maxCount, error } = checkCountRows(rows, g.ranks, where);
    this.barrierOf(g, "all_to_all_v");
    if (error) throw error;

    // Self part: a direct copy.
    const me = g.rank;
    out.set(send.subarray(sdispl[me], sdispl[me] + sendCounts[me]) as T, rdispl[me]);
    // Phase 2: rounds of up to q elements per (sender, receiver) pair through the slots.
    const q = Math.floor(this.slotElems(ctor) / n);
    const rounds = Math.ceil(maxCount / q);
    for (let t = 0; t < rounds; t++) {
      const o = t * q;
      for (let j = 0; j < n; j++) {
        if (j === me) continue;
        const c = Math.min(q, sendCounts[j] - o);
        if (c > 0) this.slot(this.rank, ctor, j * q, c).set(send.subarray(sdispl[j] + o, sdispl[j] + o + c));
      }
      this.barrierOf(g, "all_to_all_v");
      for (let i = 0; i < n; i++) {
        if (i === me) continue;
        const c = Math.min(q, recvCounts[i] - o);
        if (c > 0) out.set(this.slot(g.ranks[i], ctor, me * q, c) as T, rdispl[i] + o);
      }
      this.barrierOf(g, "all_to_all_v");
    }
  }

  protected moveBroadcast<T extends CommArray>(g: LocalGroup, data: T, root: number, rootIdx: number, h: CallHeader): void {
    const ctor = data.constructor as ArrayCtor;
    const cap = this.slotElems(ctor);
    const len = data.length;
    this.writeHeader(g, h);
    const chunks = Math.max(1, Math.ceil(len / cap));
    for (let ch = 0; ch < chunks; ch++) {
      const o = ch * cap;
      const c = Math.min(cap, len - o);
      if (g.rank === rootIdx) this.slot(this.rank, ctor, 0, c).set(data.subarray(o, o + c));
      this.barrierOf(g, "broadcast");
      if (ch === 0) this.checkHeaders(g, "broadcast");
      if (g.rank !== rootIdx) data.set(this.slot(root, ctor, 0, c) as T, o);
      this.barrierOf(g, "broadcast");
    }
  }

  protected moveGather<T extends CommArray>(g: LocalGroup, input: T, _root: number, rootIdx: number, out: T | null, h: CallHeader): void {
    const n = g.size;
    const ctor = input.constructor as ArrayCtor;
    const s = input.length;
    const isRoot = g.rank === rootIdx;
    const cap = this.slotElems(ctor);
    this.writeHeader(g, h);
    const chunks = Math.max(1, Math.ceil(s / cap));
    for (let ch = 0; ch < chunks; ch++) {
      const o = ch * cap;
      const c = Math.min(cap, s - o);
      if (!isRoot) this.slot(this.rank, ctor, 0, c).set(input.subarray(o, o + c));
      this.barrierOf(g, "gather");
      if (ch === 0) this.checkHeaders(g, "gather");
      if (out) {
        for (let j = 0; j < n; j++) {
          const src = j === g.rank ? input.subarray(o, o + c) : this.slot(g.ranks[j], ctor, 0, c);
          out.set(src as T, j * s + o);
        }
      }
      this.barrierOf(g, "gather");
    }
  }

  protected moveScatter<T extends CommArray>(g: LocalGroup, input: T | null, output: T, root: number, rootIdx: number, h: CallHeader): void {
    const n = g.size;
    const ctor = output.constructor as ArrayCtor;
    const s = output.length;
    const isRoot = g.rank === rootIdx;
    const cap = Math.floor(this.slotElems(ctor) / n);
    this.writeHeader(g, h);
    const chunks = Math.max(1, Math.ceil(s / cap));
    for (let ch = 0; ch < chunks; ch++) {
      const o = ch * cap;
      const c = Math.min(cap, s - o);
      if (isRoot) {
        const mine = this.slot(this.rank, ctor, 0, n * c);
        for (let k = 0; k < n; k++) mine.set(input!.subarray(k * s + o, k * s + o + c), k * c);
      }
      this.barrierOf(g, "scatter");
      if (ch === 0) this.checkHeaders(g, "scatter");
      output.set(this.slot(root, ctor, g.rank * c, c) as T, o);
      this.barrierOf(g, "scatter");
    }
  }

  protected moveBarrier(g: LocalGroup, h: CallHeader): void {
    this.writeHeader(g, h);
    this.barrierOf(g, "barrier");
    this.checkHeaders(g, "barrier");
    this.barrierOf(g, "barrier");
  }
}
