/**
 * The frame every transport's collectives share (communicator.ts contract; docs/comm.md): find the
 * group, check the arguments (collective-args.ts), build the call header the members compare,
 * time the call and count its nominal bytes (stats.ts). A transport extends this class with only
 * what moves the data: one protected `move*` method per collective, called after every local
 * check has passed, which exchanges the header with the group (arrival and agreement) and then the
 * data, synchronously, throwing the transport's errors (timeout, abort, mismatch).
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
import type { CollectiveName, CollectiveOptions, CommArray, Communicator, Group, OpStats, ReduceOptions } from "./communicator.ts";
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

/** A communicator whose collectives check, time and count themselves; `G` is the transport's group
 * class. Errors thrown before `move*` are plain Errors (argument checks) or TypeErrors (array type),
 * with the messages of collective-args.ts; each collective returns a rejected promise on any throw. */
export abstract class CheckedCommunicator<G extends MemberGroup> implements Communicator {
  abstract readonly transport: string;
  abstract readonly rank: number;
  abstract readonly worldSize: number;
  abstract readonly world: Group;
  /** Per-collective counters behind {@link stats}. */
  protected readonly counters = new CommStats();

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
  protected abstract moveAllReduce<T extends CommArray>(g: G, data: T, h: CallHeader, opts: ReduceOptions | undefined): void;
  /** reduce_scatter of `input` (n·s elements) into `out` (s elements, may overlap `input`). */
  protected abstract moveReduceScatter<T extends CommArray>(g: G, input: T, out: T, h: CallHeader, opts: ReduceOptions | undefined): void;
  /** all_gather of `input` (s elements) into `out` (n·s elements, may overlap `input`). */
  protected abstract moveAllGather<T extends CommArray>(g: G, input: T, out: T, h: CallHeader): void;
  /** all_to_all_v of a locally checked call; the transport checks that the members' counts pair up
   * (all-to-all-v-counts.ts) before moving data. */
  protected abstract moveAllToAllV<T extends CommArray>(g: G, call: AllToAllVCall<T>, h: CallHeader): void;
  /** broadcast of `data` in place from world rank `root` (member index `rootIdx` of `g`). */
  protected abstract moveBroadcast<T extends CommArray>(g: G, data: T, root: number, rootIdx: number, h: CallHeader): void;
  /** gather of `input` to world rank `root`; `out` is the checked output at the root, null elsewhere. */
  protected abstract moveGather<T extends CommArray>(g: G, input: T, root: number, rootIdx: number, out: T | null, h: CallHeader): void;
  /** scatter from world rank `root`; `input` is checked at the root (n·s elements), ignored elsewhere. */
  protected abstract moveScatter<T extends CommArray>(g: G, input: T | null, output: T, root: number, rootIdx: number, h: CallHeader): void;
  /** Return when every member of `g` has arrived (after checking that all called barrier). */
  protected abstract moveBarrier(g: G, h: CallHeader): void;

  // ---- the collectives --------------------------------------------------------------------------

  async allReduce<T extends CommArray>(data: T, opts?: ReduceOptions): Promise<T> {
    const t0 = performance.now();
    const g = this.group(opts, "all_reduce");
    const dt = dtypeCode(data);
    validateReduce(data, opts, "all_reduce");
    this.moveAllReduce(g, data, { op: OP_CODES.all_reduce, dtype: dt, length: data.length, root: 0, flags: reduceFlags(opts) }, opts);
    this.counters.record("all_reduce", ringAllReduceBytes(data.byteLength, g.size), performance.now() - t0);
    return data;
  }

  async reduceScatter<T extends CommArray>(input: T, output?: T, opts?: ReduceOptions): Promise<T> {
    const t0 = performance.now();
    const g = this.group(opts, "reduce_scatter");
    const dt = dtypeCode(input);
    validateReduce(input, opts, "reduce_scatter");
    const n = g.size;
    if (input.length % n !== 0) {
      throw new Error(`reduce_scatter on group ${g.name}: input length ${input.length} is not divisible by the group size ${n}`);
    }
    const out = reduceScatterOutput(input, output, n, g.name);
    this.moveReduceScatter(g, input, out, { op: OP_CODES.reduce_scatter, dtype: dt, length: input.length, root: 0, flags: reduceFlags(opts) }, opts);
    this.counters.record("reduce_scatter", ringShardBytes(input.byteLength, n), performance.now() - t0);
    return out;
  }

  async allGather<T extends CommArray>(input: T, output?: T, opts?: CollectiveOptions): Promise<T> {
    const t0 = performance.now();
    const g = this.group(opts, "all_gather");
    const dt = dtypeCode(input);
    const out = allGatherOutput(input, output, g.size, g.name);
    this.moveAllGather(g, input, out, { op: OP_CODES.all_gather, dtype: dt, length: input.length, root: 0, flags: 0 });
    this.counters.record("all_gather", ringShardBytes(out.byteLength, g.size), performance.now() - t0);
    return out;
  }

  async allToAllV<T extends CommArray>(
    send: T,
    sendCounts: readonly number[],
    recvCounts: readonly number[],
    recv?: T,
    opts?: CollectiveOptions,
  ): Promise<T> {
    const t0 = performance.now();
    const g = this.group(opts, "all_to_all_v");
    const dt = dtypeCode(send);
    const n = g.size;
    const where = `all_to_all_v on group ${g.name} (rank ${this.rank})`;
    const { out, sdispl, rdispl } = allToAllVLayout(send, sendCounts, recvCounts, recv, n, where);
    this.moveAllToAllV(g, { send, sendCounts, recvCounts, out, sdispl, rdispl, where }, { op: OP_CODES.all_to_all_v, dtype: dt, length: 0, root: 0, flags: 0 });
    const bpe = (send.constructor as ArrayCtor).BYTES_PER_ELEMENT;
    this.counters.record("all_to_all_v", allToAllVSentBytes(sdispl[n], sendCounts[g.rank], bpe), performance.now() - t0);
    return out;
  }

  async broadcast<T extends CommArray>(data: T, root: number, opts?: CollectiveOptions): Promise<T> {
    const t0 = performance.now();
    const g = this.group(opts, "broadcast");
    const dt = dtypeCode(data);
    const rootIdx = rootIndex(g, root, "broadcast");
    this.moveBroadcast(g, data, root, rootIdx, { op: OP_CODES.broadcast, dtype: dt, length: data.length, root, flags: 0 });
    this.counters.record("broadcast", broadcastSentBytes(data.byteLength, g.size, g.rank === rootIdx), performance.now() - t0);
    return data;
  }

  async gather<T extends CommArray>(input: T, root: number, output?: T, opts?: CollectiveOptions): Promise<T | null> {
    const t0 = performance.now();
    const g = this.group(opts, "gather");
    const dt = dtypeCode(input);
    const rootIdx = rootIndex(g, root, "gather");
    const isRoot = g.rank === rootIdx;
    const out = gatherOutput(input, output, g.size, isRoot, g.name);
    this.moveGather(g, input, root, rootIdx, out, { op: OP_CODES.gather, dtype: dt, length: input.length, root, flags: 0 });
    this.counters.record("gather", gatherSentBytes(input.byteLength, isRoot), performance.now() - t0);
    return out;
  }

  async scatter<T extends CommArray>(input: T | null, output: T, root: number, opts?: CollectiveOptions): Promise<T> {
    const t0 = performance.now();
    const g = this.group(opts, "scatter");
    const dt = dtypeCode(output);
    const rootIdx = rootIndex(g, root, "scatter");
    const n = g.size;
    const isRoot = g.rank === rootIdx;
    checkScatterInput(input, output, n, isRoot, root, g.name);
    this.moveScatter(g, input, output, root, rootIdx, { op: OP_CODES.scatter, dtype: dt, length: output.length, root, flags: 0 });
    this.counters.record("scatter", scatterSentBytes(n * output.byteLength, n, isRoot), performance.now() - t0);
    return output;
  }

  async barrier(opts?: CollectiveOptions): Promise<void> {
    const t0 = performance.now();
    const g = this.group(opts, "barrier");
    this.moveBarrier(g, { op: OP_CODES.barrier, dtype: 0, length: 0, root: 0, flags: 0 });
    this.counters.record("barrier", 0, performance.now() - t0);
  }
}
