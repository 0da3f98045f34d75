/**
 * The `mpi` transport: one process per rank, collectives through Open MPI's C API (ffi.ts),
 * launched by `mpirun` (docs/comm.md "The mpi transport"). Each rank's own argument checks, the
 * call header's contents, timing and byte accounting are ../checked-communicator.ts's; this file
 * exchanges the headers and moves the data.
 *
 * Every collective has two phases:
 * 1. Arrival and argument check. Each member posts non-blocking sends of its call header (op,
 *    array type, length, root, reduction flags) to every other member of the group and receives
 *    theirs (MPI_Isend/MPI_Irecv), polling MPI_Testall until all have arrived. A member that has
 *    not arrived within the timeout is named by the recv that is still pending
 *    (CommTimeoutError: op, group, missing ranks); disagreeing headers raise the same
 *    CommMismatchError table on every member as the `local` transport. When every header is in,
 *    every member has entered the call (the exchange is also the barrier).
 * 2. Data movement with Open MPI's non-blocking collectives on raw bytes (MPI_BYTE: MPI_Ialltoallv,
 *    MPI_Iallgather(v), MPI_Ibcast, MPI_Igatherv, MPI_Iscatterv), polled with MPI_Testall under the
 *    same pause-proof timeout as the arrival: a member stopped or dead after it arrived (SIGSTOP of
 *    one rank mid-transfer) made the blocking calls wait forever; now the others time out naming
 *    the members still in the transfer (all of them: MPI does not say which one is late). Reductions are
 *    NOT MPI_Allreduce: Open MPI's algorithms (recursive doubling, rings with segments) combine
 *    members in an order that depends on the algorithm and the size, which would break the
 *    determinism rule. Instead all_reduce = MPI_Ialltoallv (member k receives part k of everyone's
 *    array) + the same `reduceInto` in ascending group order as `local` + MPI_Iallgatherv;
 *    reduce_scatter = MPI_Ialltoallv + reduceInto. Each rank sends 2(n−1)/n·B (resp. (n−1)/n·B),
 *    the ring volumes, and results are bit-identical to `local` for every dtype.
 *
 * Groups: `newGroup` is not a collective (as on `local`), so the MPI communicator of a sub-group
 * is created lazily, by MPI_Comm_create_group (MPI-3: collective over the group's members only),
 * at the group's first collective, when all its members are in that call by the contract. One MPI
 * communicator per rank set, shared by every Group object with those ranks. All communicators
 * derive from a duplicate of MPI_COMM_WORLD with the MPI_ERRORS_RETURN error handler, so MPI
 * errors come back as codes and are thrown with MPI_Error_string's text.
 *
 * Limits: one buffer of one call is at most 2³¹−1 bytes for reduce_scatter, all_gather,
 * all_to_all_v, gather and scatter (MPI's int counts); all_reduce is cut into chunks of 64 MiB
 * and broadcast into chunks of 1 GiB. The reductions' receive buffer (one array's worth, at most
 * 256 MiB) is kept between calls. All MPI calls are made from the thread that created the communicator
 * (MPI_THREAD_FUNNELED).
 */

import { ptr, type Pointer } from "@zeromoe/kernels/runtime/ffi";
import type { CollectiveName, CommArray, Group, ReduceOptions } from "../communicator.ts";
import { checkCountRows, packCountRow } from "../all-to-all-v-counts.ts";
import { CallTrace, OP_CODES, callMismatchError, describeMemberCall, headerMismatchTable, type CallHeader } from "../call-header.ts";
import { CheckedCommunicator, type AllToAllVCall } from "../checked-communicator.ts";
import { reduceSettings, sharesBytes, type ArrayCtor } from "../collective-args.ts";
import { CommTimeoutError } from "../errors.ts";
import { groupRanks, MemberGroup } from "../group-ranks.ts";
import { reduceInto } from "../reduce.ts";
import { resolveTransportOptions, type TransportOptions } from "../transport-options.ts";
import { handleOut, handleValue, loadMpi, MPI_SUCCESS, MPI_THREAD_FUNNELED, mpiErrorString, type MpiLib } from "./ffi.ts";
import { WaitClock } from "../wait-clock.ts";
import { sleepSync } from "@zeromoe/kernels/runtime";

/** Options of an MPI communicator (timeout: the longest wait for the members' call headers). */
export type MpiCommOptions = TransportOptions;

/** Header flags of {@link MpiCommunicator.gatherBytes}: the launcher gathering the entry's results. */
const RESULTS_FLAG = 16;
/** Doubles per call header: op, dtype, length, root, flags. */
const HEADER_LEN = 5;
/** Tag of header messages (on the group's own communicator; collectives use another context). */
const HEADER_TAG = 7401;
/** Largest byte count of one MPI call in the chunked collectives (all_reduce, broadcast). */
const CHUNK_BYTES = 1 << 30;
/** all_reduce runs in chunks of at most this many bytes (bounds its receive buffer). */
const ALL_REDUCE_CHUNK_BYTES = 64 << 20;
/** Largest receive buffer kept between calls; larger ones are allocated per call. */
const MAX_SCRATCH_BYTES = 256 << 20;
/** Largest byte count MPI's `int` counts and displacements can express. */
const INT_MAX = 2 ** 31 - 1;
/** Tight MPI_Testall polls before yielding the CPU between polls. */
const SPIN_POLLS = 2000;
/** After this long waiting, sleep 1 ms between polls (a late peer, not a fast one). */
const SLEEP_AFTER_MS = 50;

/** A zero-length buffer cannot give a pointer; MPI ignores the address of a 0-byte transfer. */
const DUMMY = new Uint8Array(8);

/** The address of `a`'s first element (a dummy one for empty arrays). */
function addr(a: CommArray | Uint8Array): Pointer {
  return a.byteLength === 0 ? ptr(DUMMY) : ptr(a);
}

/** Balanced split of `len` elements in n parts: part k is [floor(k·len/n), floor((k+1)·len/n)). */
function partStart(len: number, n: number, k: number): number {
  return Math.floor((len * k) / n);
}

/** A group with the key of its rank set in the communicator's table of MPI communicators. */
class MpiGroup extends MemberGroup {
  constructor(owner: MpiCommunicator, ranks: readonly number[], rank: number, name: string, readonly key: string) {
    super(owner, ranks, rank, name);
  }
}

/** A rank's communicator on the `mpi` transport (see the file comment). */
export class MpiCommunicator extends CheckedCommunicator<MpiGroup> {
  readonly transport = "mpi";
  readonly rank: number;
  readonly worldSize: number;
  readonly world: Group;
  private readonly lib: MpiLib;
  /** MPI communicator per rank set (key: ranks joined by ","); the world's is a dup of COMM_WORLD. */
  private readonly comms = new Map<string, Pointer>();
  private readonly timeoutMs: number;
  private readonly tracer: CallTrace;
  private readonly hdrSend = new Float64Array(HEADER_LEN);
  /** Receive buffer of the reductions, kept between calls (grown to the largest call's need). */
  private scratch = new ArrayBuffer(0);

  /**
   * Initialise MPI (MPI_Init_thread with MPI_THREAD_FUNNELED, unless already initialised) and
   * attach to MPI_COMM_WORLD. Every process of the job must construct one (MPI_Comm_dup is a
   * collective of the world). Throws when Open MPI cannot be loaded or initialised.
   */
  constructor(opts: MpiCommOptions = {}) {
    super();
    const lib = (this.lib = loadMpi());
    const flag = new Int32Array(1);
    this.check(lib.fn.MPI_Initialized(flag), "MPI_Initialized");
    if (flag[0] === 0) {
      const provided = new Int32Array(1);
      this.check(lib.fn.MPI_Init_thread(null, null, MPI_THREAD_FUNNELED, provided), "MPI_Init_thread");
    }
    this.check(lib.fn.MPI_Comm_set_errhandler(lib.COMM_WORLD, lib.ERRORS_RETURN), "MPI_Comm_set_errhandler");
    const out = new Int32Array(1);
    this.check(lib.fn.MPI_Comm_rank(lib.COMM_WORLD, out), "MPI_Comm_rank");
    this.rank = out[0]!;
    this.check(lib.fn.MPI_Comm_size(lib.COMM_WORLD, out), "MPI_Comm_size");
    this.worldSize = out[0]!;
    const h = handleOut();
    this.check(lib.fn.MPI_Comm_dup(lib.COMM_WORLD, h), "MPI_Comm_dup");
    const world = handleValue(h);
    this.check(lib.fn.MPI_Comm_set_errhandler(world, lib.ERRORS_RETURN), "MPI_Comm_set_errhandler");
    const all = Array.from({ length: this.worldSize }, (_, i) => i);
    this.comms.set(all.join(","), world);
    const { timeoutMs, trace } = resolveTransportOptions(opts);
    this.timeoutMs = timeoutMs;
    this.tracer = new CallTrace(this.rank, trace);
    this.world = this.newGroup(all, "world");
  }

  /** Throw with MPI's error text when `code` is not MPI_SUCCESS. */
  private check(code: number, what: string): void {
    if (code !== MPI_SUCCESS) throw new Error(`mpi transport (rank ${this.rank ?? "?"}): ${what} failed: ${mpiErrorString(this.lib, code)} (error ${code})`);
  }

  newGroup(ranks: readonly number[], name?: string): Group {
    const { sorted, me, name: groupName } = groupRanks(ranks, name, this.rank, this.worldSize);
    return new MpiGroup(this, sorted, me, groupName, sorted.join(","));
  }

  // ---- helpers ------------------------------------------------------------------------------

  /** The MPI communicator of `g`, created at its first collective (MPI_Comm_create_group over the
   * members only; every member is in the same first collective on the group by the contract). */
  private commOf(g: MpiGroup): Pointer {
    const c = this.comms.get(g.key);
    if (c !== undefined) return c;
    const lib = this.lib;
    const world = this.comms.get(this.world.ranks.join(","))!;
    const wg = handleOut();
    this.check(lib.fn.MPI_Comm_group(world, wg), "MPI_Comm_group");
    const gg = handleOut();
    this.check(lib.fn.MPI_Group_incl(handleValue(wg), g.size, Int32Array.from(g.ranks), gg), "MPI_Group_incl");
    const nc = handleOut();
    // the tag only separates concurrent creations; any value ≤ MPI_TAG_UB (≥ 32767) that all members agree on
    let tag = 0;
    for (const r of g.ranks) tag = (tag * 31 + r + 1) % 32749;
    this.check(lib.fn.MPI_Comm_create_group(world, handleValue(gg), tag, nc), `MPI_Comm_create_group for group ${g.name}`);
    lib.fn.MPI_Group_free(gg);
    lib.fn.MPI_Group_free(wg);
    const comm = handleValue(nc);
    this.check(lib.fn.MPI_Comm_set_errhandler(comm, lib.ERRORS_RETURN), "MPI_Comm_set_errhandler");
    this.comms.set(g.key, comm);
    return comm;
  }

  /**
   * Phase 1 of every collective (file comment): exchange call headers with every member, waiting
   * at most the timeout. Returns the group's MPI communicator. Throws CommTimeoutError naming the
   * members whose header did not arrive, CommMismatchError when headers disagree.
   */
  private arrive(g: MpiGroup, op: CollectiveName, h: CallHeader): Pointer {
    this.tracer.note(h, g.name);
    const comm = this.commOf(g);
    const n = g.size;
    if (n === 1) return comm;
    const lib = this.lib;
    const mine = this.hdrSend;
    mine[0] = h.op;
    mine[1] = h.dtype;
    mine[2] = h.length;
    mine[3] = h.root;
    mine[4] = h.flags;
    const all = new Float64Array(n * HEADER_LEN);
    all.set(mine, g.rank * HEADER_LEN);
    // requests: [0, n) receives from member j (j ≠ me), [n, 2n) sends to member j
    const reqs = new BigUint64Array(2 * n);
    const reqBase = ptr(reqs);
    const bytes = HEADER_LEN * 8;
    for (let j = 0; j < n; j++) {
      if (j === g.rank) continue;
      this.check(lib.fn.MPI_Irecv(ptr(all, j * bytes), bytes, lib.BYTE, j, HEADER_TAG, comm, (reqBase + 8 * j) as Pointer), `${op}: MPI_Irecv`);
      this.check(lib.fn.MPI_Isend(ptr(mine), bytes, lib.BYTE, j, HEADER_TAG, comm, (reqBase + 8 * (n + j)) as Pointer), `${op}: MPI_Isend`);
    }
    // null requests (own slot) count as complete: fill them with MPI_REQUEST_NULL by testing
    // only the posted ones
    const posted = new BigUint64Array(2 * (n - 1));
    let k = 0;
    for (let j = 0; j < n; j++) if (j !== g.rank) posted[k++] = reqs[j]!;
    for (let j = 0; j < n; j++) if (j !== g.rank) posted[k++] = reqs[n + j]!;
    this.waitAll(posted, op, g, () => {
      // which receives are still pending: test each one alone
      const missing: number[] = [];
      const flag = new Int32Array(1);
      let i = 0;
      for (let j = 0; j < n; j++) {
        if (j === g.rank) continue;
        const one = new BigUint64Array([posted[i++]!]);
        if (one[0] !== 0n) {
          lib.fn.MPI_Testall(1, one, flag, null);
          if (flag[0] === 0) missing.push(g.ranks[j]!);
          posted[i - 1] = one[0]!;
        }
      }
      return missing;
    });
    const headers = g.ranks.map((_, j) => {
      const b = j * HEADER_LEN;
      return { op: all[b]!, dtype: all[b + 1]!, length: all[b + 2]!, root: all[b + 3]!, flags: all[b + 4]! };
    });
    // a member in gatherBytes (RESULTS_FLAG) has returned from its entry function
    const table = headerMismatchTable(headers, g.ranks, (h, r) =>
      h.op === OP_CODES.gather && h.flags === RESULTS_FLAG ? `rank ${r}: returned from its entry function (gathering the results)` : describeMemberCall(h, r),
    );
    if (table !== null) throw callMismatchError(op, g.name, this.rank, table);
    return comm;
  }

  /** Poll MPI_Testall on `reqs` until all complete or the timeout passes (then throw naming
   * `missing()`). Spins, then yields the CPU, then sleeps 1 ms between polls. */
  private waitAll(reqs: BigUint64Array, op: CollectiveName, g: MpiGroup, missing: () => number[], waitingFor?: string): void {
    const lib = this.lib;
    const flag = new Int32Array(1);
    // waiting time with suspensions left out (wait-clock.ts): a whole job stopped with SIGSTOP for
    // longer than the timeout carries on after SIGCONT, as the local transport does
    const clock = new WaitClock();
    clock.tick();
    for (let polls = 0; ; polls++) {
      this.check(lib.fn.MPI_Testall(reqs.length, reqs, flag, null), `${op}: MPI_Testall`);
      if (flag[0] !== 0) return;
      if (polls < SPIN_POLLS) continue;
      const waited = clock.tick();
      if (waited > this.timeoutMs) {
        const m = missing();
        throw new CommTimeoutError(op, g.name, m.length > 0 ? m : g.ranks.filter((r) => r !== this.rank), this.timeoutMs / 1000, this.rank, waitingFor);
      }
      if (waited > SLEEP_AFTER_MS) sleepSync(1);
      else lib.yieldCpu();
    }
  }

  /**
   * Phase 2 of a collective (file comment): start one non-blocking MPI collective with `start`
   * (given the address of its MPI_Request) and poll it to completion under the timeout.
   * `keep` holds the arrays MPI reads or writes until completion (buffers, counts, displacements),
   * referenced until then. @throws CommTimeoutError naming the group's other members, Error for an
   * MPI error code (MPI_Error_string's text, naming `what`).
   */
  private transfer(g: MpiGroup, op: CollectiveName, what: string, start: (req: Pointer) => number, ...keep: unknown[]): void {
    const req = new BigUint64Array(1);
    this.check(start(ptr(req)), `${op}: ${what}`);
    const others = g.ranks.filter((r) => r !== this.rank);
    this.waitAll(req, op, g, () => others, `to finish ${what} (every member had arrived: one stopped or died during the transfer)`);
    keep.length = 0;
  }

  private fitsInt(bytes: number, op: CollectiveName, g: MpiGroup): void {
    if (bytes > INT_MAX) throw new Error(`${op} on group ${g.name} (rank ${this.rank}): ${bytes} bytes exceed the mpi transport's limit of 2^31−1 bytes per buffer (MPI int counts); split the call`);
  }

  /**
   * Exchange part j of `send` (elements [sOff[j], sOff[j]+sCnt[j])) with member j; receive member
   * j's part for me at `recv[rOff[j]…]`. Counts in elements; MPI_Ialltoallv on bytes, under the timeout.
   */
  private alltoallv(comm: Pointer, g: MpiGroup, send: CommArray, sCnt: ArrayLike<number>, sOff: ArrayLike<number>, recv: CommArray, rCnt: ArrayLike<number>, rOff: ArrayLike<number>, op: CollectiveName): void {
    const n = sCnt.length;
    const bpe = send.BYTES_PER_ELEMENT;
    const sc = new Int32Array(n), sd = new Int32Array(n), rc = new Int32Array(n), rd = new Int32Array(n);
    for (let j = 0; j < n; j++) {
      sc[j] = sCnt[j]! * bpe;
      sd[j] = sOff[j]! * bpe;
      rc[j] = rCnt[j]! * bpe;
      rd[j] = rOff[j]! * bpe;
    }
    const lib = this.lib;
    this.transfer(g, op, "MPI_Ialltoallv", (req) => lib.fn.MPI_Ialltoallv(addr(send), sc, sd, lib.BYTE, addr(recv), rc, rd, lib.BYTE, comm, req), send, recv, sc, sd, rc, rd);
  }

  /** `len` elements of `ctor` on the reusable scratch buffer (its contents are garbage). Allocating
   * and zeroing a fresh receive array per call cost about as much as moving the data (measured:
   * 0.8 ms for 1 MB). */
  private scratchOf(ctor: ArrayCtor, len: number): CommArray {
    const bytes = len * ctor.BYTES_PER_ELEMENT;
    if (bytes > MAX_SCRATCH_BYTES) return new ctor(len);
    if (this.scratch.byteLength < bytes) this.scratch = new ArrayBuffer(Math.max(bytes, 2 * this.scratch.byteLength));
    return new ctor(this.scratch, 0, len);
  }

  /** all_reduce of `data[o, o+c)` over `g` (one chunk; see the file comment). */
  private allReduceChunk(comm: Pointer, g: MpiGroup, data: CommArray, o: number, c: number, opts: ReduceOptions | undefined): void {
    const n = g.size;
    const me = g.rank;
    const ctor = data.constructor as ArrayCtor;
    const s0 = partStart(c, n, me);
    const mySize = partStart(c, n, me + 1) - s0;
    const sCnt = new Array<number>(n), sOff = new Array<number>(n), rCnt = new Array<number>(n), rOff = new Array<number>(n);
    for (let j = 0; j < n; j++) {
      sOff[j] = partStart(c, n, j);
      sCnt[j] = partStart(c, n, j + 1) - sOff[j]!;
      rCnt[j] = mySize;
      rOff[j] = j * mySize;
    }
    const chunk = data.subarray(o, o + c) as CommArray;
    const parts = this.scratchOf(ctor, n * mySize);
    this.alltoallv(comm, g, chunk, sCnt, sOff, parts, rCnt, rOff, "all_reduce");
    const srcs = Array.from({ length: n }, (_, j) => parts.subarray(j * mySize, (j + 1) * mySize) as CommArray);
    const { op, average, half } = reduceSettings(opts);
    reduceInto(parts, 0, srcs, mySize, op, average, n, half);
    const bpe = ctor.BYTES_PER_ELEMENT;
    const rc = new Int32Array(n), rd = new Int32Array(n);
    for (let j = 0; j < n; j++) {
      rc[j] = sCnt[j]! * bpe;
      rd[j] = sOff[j]! * bpe;
    }
    const lib = this.lib;
    this.transfer(g, "all_reduce", "MPI_Iallgatherv", (req) => lib.fn.MPI_Iallgatherv(addr(parts), mySize * bpe, lib.BYTE, addr(chunk), rc, rd, lib.BYTE, comm, req), parts, chunk, rc, rd);
  }

  // ---- data movement of each collective (checks, header, stats: ../checked-communicator.ts) ----

  protected moveAllReduce<T extends CommArray>(g: MpiGroup, data: T, h: CallHeader, opts: ReduceOptions | undefined): void {
    const n = g.size;
    const comm = this.arrive(g, "all_reduce", h);
    if (n === 1) {
      const { op, average, half } = reduceSettings(opts);
      if (average || data instanceof Uint16Array) reduceInto(data, 0, [data], data.length, op, average, 1, half);
    } else {
      const cap = Math.floor(ALL_REDUCE_CHUNK_BYTES / data.BYTES_PER_ELEMENT);
      for (let o = 0; o < data.length; o += cap) this.allReduceChunk(comm, g, data, o, Math.min(cap, data.length - o), opts);
    }
  }

  protected moveReduceScatter<T extends CommArray>(g: MpiGroup, input: T, out: T, h: CallHeader, opts: ReduceOptions | undefined): void {
    const n = g.size;
    const ctor = input.constructor as ArrayCtor;
    const s = input.length / n;
    this.fitsInt(input.byteLength, "reduce_scatter", g);
    const comm = this.arrive(g, "reduce_scatter", h);
    const parts = this.scratchOf(ctor, n * s);
    if (n === 1) parts.set(input);
    else {
      const cnt = new Array<number>(n).fill(s);
      const off = Array.from({ length: n }, (_, j) => j * s);
      this.alltoallv(comm, g, input, cnt, off, parts, cnt, off, "reduce_scatter");
    }
    const srcs = Array.from({ length: n }, (_, j) => parts.subarray(j * s, (j + 1) * s) as CommArray);
    const { op, average, half } = reduceSettings(opts);
    reduceInto(out, 0, srcs, s, op, average, n, half);
  }

  protected moveAllGather<T extends CommArray>(g: MpiGroup, input: T, out: T, h: CallHeader): void {
    const n = g.size;
    this.fitsInt(out.byteLength, "all_gather", g);
    const comm = this.arrive(g, "all_gather", h);
    const src = sharesBytes(input, out) ? input.slice() : input;
    if (n === 1) out.set(src as T);
    else {
      const lib = this.lib;
      const bytes = src.byteLength;
      this.transfer(g, "all_gather", "MPI_Iallgather", (req) => lib.fn.MPI_Iallgather(addr(src), bytes, lib.BYTE, addr(out), bytes, lib.BYTE, comm, req), src, out);
    }
  }

  protected moveAllToAllV<T extends CommArray>(g: MpiGroup, call: AllToAllVCall<T>, h: CallHeader): void {
    const { send, sendCounts, recvCounts, out, sdispl, rdispl, where } = call;
    const n = g.size;
    const bpe = send.BYTES_PER_ELEMENT;
    this.fitsInt(sdispl[n]! * bpe, "all_to_all_v", g);
    this.fitsInt(rdispl[n]! * bpe, "all_to_all_v", g);
    const comm = this.arrive(g, "all_to_all_v", h);
    const me = g.rank;
    const lib = this.lib;
    if (n > 1) {
      // the n×n count matrix on every member (as local does), validated before any data moves
      const mine = new Float64Array(2 * n);
      packCountRow(mine, sendCounts, recvCounts);
      const mats = new Float64Array(2 * n * n);
      this.transfer(g, "all_to_all_v", "MPI_Iallgather of the counts", (req) => lib.fn.MPI_Iallgather(ptr(mine), 16 * n, lib.BYTE, ptr(mats), 16 * n, lib.BYTE, comm, req), mine, mats);
      const rows = Array.from({ length: n }, (_, i) => mats.subarray(2 * n * i, 2 * n * (i + 1)));
      const { error } = checkCountRows(rows, g.ranks, where);
      if (error) throw error;
      const src = sharesBytes(send, out) ? send.slice() : send;
      this.alltoallv(comm, g, src, sendCounts, sdispl, out, recvCounts, rdispl, "all_to_all_v");
    } else {
      out.set(send.subarray(sdispl[me]!, sdispl[me]! + sendCounts[me]!) as T, rdispl[me]!);
    }
  }

  protected moveBroadcast<T extends CommArray>(g: MpiGroup, data: T, _root: number, rootIdx: number, h: CallHeader): void {
    const comm = this.arrive(g, "broadcast", h);
    if (g.size > 1) {
      const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      for (let o = 0; o < bytes.length; o += CHUNK_BYTES) {
        const c = bytes.subarray(o, Math.min(bytes.length, o + CHUNK_BYTES));
        this.transfer(g, "broadcast", "MPI_Ibcast", (req) => this.lib.fn.MPI_Ibcast(addr(c), c.length, this.lib.BYTE, rootIdx, comm, req), c);
      }
    }
  }

  protected moveGather<T extends CommArray>(g: MpiGroup, input: T, _root: number, rootIdx: number, out: T | null, h: CallHeader): void {
    const n = g.size;
    this.fitsInt(n * input.byteLength, "gather", g);
    const comm = this.arrive(g, "gather", h);
    const src = out && sharesBytes(input, out) ? input.slice() : input;
    if (n === 1) out!.set(src as T);
    else {
      const lib = this.lib;
      const b = src.byteLength;
      const counts = new Int32Array(n).fill(b);
      const displs = Int32Array.from({ length: n }, (_, j) => j * b);
      this.transfer(g, "gather", "MPI_Igatherv", (req) => lib.fn.MPI_Igatherv(addr(src), b, lib.BYTE, out ? addr(out) : null, counts, displs, lib.BYTE, rootIdx, comm, req), src, out, counts, displs);
    }
  }

  protected moveScatter<T extends CommArray>(g: MpiGroup, input: T | null, output: T, _root: number, rootIdx: number, h: CallHeader): void {
    const n = g.size;
    const s = output.length;
    const isRoot = g.rank === rootIdx;
    this.fitsInt(n * output.byteLength, "scatter", g);
    const comm = this.arrive(g, "scatter", h);
    const src = isRoot && sharesBytes(input!, output) ? input!.slice() : input;
    if (n === 1) output.set(src!.subarray(0, s) as T);
    else {
      const lib = this.lib;
      const b = output.byteLength;
      const counts = new Int32Array(n).fill(b);
      const displs = Int32Array.from({ length: n }, (_, j) => j * b);
      this.transfer(g, "scatter", "MPI_Iscatterv", (req) => lib.fn.MPI_Iscatterv(isRoot ? addr(src!) : null, counts, displs, lib.BYTE, addr(output), b, lib.BYTE, rootIdx, comm, req), src, output, counts, displs);
    }
  }

  protected moveBarrier(g: MpiGroup, h: CallHeader): void {
    // the header exchange returns only once every member has entered: it is the barrier
    this.arrive(g, "barrier", h);
  }

  /**
   * Gather one byte string per rank to world rank `root` (not a counted collective; for the
   * launcher's results). Returns the strings in rank order at the root, null elsewhere.
   */
  async gatherBytes(bytes: Uint8Array, root = 0): Promise<Uint8Array[] | null> {
    const lib = this.lib;
    const W = this.worldSize;
    // arrival first, with the timeout, like every collective; a peer still in another collective
    // gets a CommMismatchError saying this rank has returned
    const comm = this.arrive(this.world as MpiGroup, "gather", { op: OP_CODES.gather, dtype: 0, length: 0, root, flags: RESULTS_FLAG });
    const isRoot = this.rank === root;
    const counts = new Int32Array(W);
    const one = new Int32Array([bytes.length]);
    const world = this.world as MpiGroup;
    const fours = new Int32Array(W).fill(4);
    const at = Int32Array.from({ length: W }, (_, j) => 4 * j);
    this.transfer(world, "gather", "MPI_Igatherv of the result lengths", (req) => lib.fn.MPI_Igatherv(ptr(one), 4, lib.BYTE, ptr(counts), fours, at, lib.BYTE, root, comm, req), one, counts, fours, at);
    const displs = new Int32Array(W);
    let total = 0;
    for (let j = 0; j < W; j++) {
      displs[j] = total;
      total += counts[j]!;
    }
    if (total > INT_MAX) throw new Error(`gatherBytes: ${total} bytes exceed 2^31−1`);
    const out = isRoot ? new Uint8Array(Math.max(1, total)) : null;
    this.transfer(world, "gather", "MPI_Igatherv of the results", (req) => lib.fn.MPI_Igatherv(addr(bytes), bytes.length, lib.BYTE, out ? ptr(out) : null, counts, displs, lib.BYTE, root, comm, req), bytes, out, counts, displs);
    if (!out) return null;
    return Array.from({ length: W }, (_, j) => out.slice(displs[j]!, displs[j]! + counts[j]!));
  }

  /** End the whole job now: MPI_Abort(MPI_COMM_WORLD, code). Open MPI's mpirun kills every rank
   * and exits with `code`. Does not return. */
  abort(code: number): never {
    this.lib.fn.MPI_Abort(this.lib.COMM_WORLD, code);
    process.exit(code);
  }

  /** Leave MPI (MPI_Finalize). Collectives must not be called afterwards. */
  finalize(): void {
    this.lib.fn.MPI_Finalize();
  }
}
