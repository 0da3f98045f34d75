/**
 * The communicator contract: what a rank sees of the other ranks.
 *
 * Ranks share nothing but their communicator. Every collective works on *host* typed arrays and is
 * asynchronous: the call *issues* it and returns a {@link Work} handle; `wait()` (or `await` on the
 * handle) completes it. Issuing fixes the collective's place in this rank's order of collectives,
 * so a caller may issue the next unit's all_gather, compute, and wait only when the unit is needed;
 * the launched transports (`local`, `mpi`) move the data on a progress thread of the rank while the
 * caller computes (docs/comm.md). As with MPI/NCCL, every member of a group must issue the same
 * collectives on that group in the same order with matching arguments (dtype, lengths, root); a
 * mismatch is detected and reported with an error naming the op, the group and the ranks that
 * disagree. Until its handle completes, a collective owns its arrays: the caller must neither read
 * its output nor write its input (an input given as a promise is read when it resolves, still in
 * the issue order).
 *
 * Determinism rule (docs/comm.md): reductions combine element `i` of the members' arrays in fixed
 * group order — `((x₀ ⊕ x₁) ⊕ x₂) ⊕ … ⊕ x_{n−1}` where `x_k` is the array of the k-th member in
 * ascending world-rank order — in the precision of the array type:
 * - Float32Array: f32 adds (each partial sum rounded to f32); Float64Array: f64 adds.
 * - Int32Array / Uint32Array: integer adds wrapping modulo 2³².
 * - Uint16Array holds raw 16-bit floats, `bf16` unless `half: "f16"` is given: the values are
 *   widened to f32 exactly, summed with f32 adds in group order, and rounded to 16 bits once
 *   (round to nearest even; NaN stays NaN).
 * - `average` divides the final (f32/f64) sum by the group size once, before the final 16-bit
 *   rounding where there is one. Integer arrays refuse `average`.
 * Hence `allReduce(x)` equals `reduceScatter(x)` followed by `allGather` bit for bit, element by
 * element — the equivalence ZeRO stages 1–3 rely on to reproduce data parallelism (docs/domain.md §5).
 */

/** Host array types a collective accepts. Uint16Array carries raw bf16 (default) or f16 bits. */
export type CommArray = Float32Array | Float64Array | Uint16Array | Int32Array | Uint32Array;

/** Elementwise reduction operator. `max` propagates NaN. */
export type CommReduceOp = "sum" | "max";

/** Names under which {@link Communicator.stats} reports each collective. */
export type CollectiveName =
  | "all_reduce"
  | "reduce_scatter"
  | "all_gather"
  | "all_to_all_v"
  | "broadcast"
  | "gather"
  | "scatter"
  | "barrier";

/** Every {@link CollectiveName}, in the order stats are listed. */
export const COLLECTIVE_NAMES: readonly CollectiveName[] = [
  "all_reduce",
  "reduce_scatter",
  "all_gather",
  "all_to_all_v",
  "broadcast",
  "gather",
  "scatter",
  "barrier",
];

/** A set of ranks that run collectives together. Members are kept in ascending world-rank order,
 * which is also the reduction order and the placement order of all_gather/gather output. */
export interface Group {
  /** World ranks of the members, ascending. */
  readonly ranks: readonly number[];
  /** Number of members (the group's world_size). */
  readonly size: number;
  /** This rank's index within {@link Group.ranks} (its group rank). */
  readonly rank: number;
  /** Readable name for errors and logs, e.g. `"world"`, `"ep[0,1]"`, `"[0,2]"`. */
  readonly name: string;
}

/** Options shared by the collectives. */
export interface CollectiveOptions {
  /** Group to run on; default: the world group. */
  group?: Group;
}

/** Options of the reducing collectives (all_reduce, reduce_scatter). */
export interface ReduceOptions extends CollectiveOptions {
  /** Reduction operator; default `"sum"`. */
  op?: CommReduceOp;
  /** Divide the sum by the group size (float arrays only; with `op: "max"` it is an error). */
  average?: boolean;
  /** Interpretation of Uint16Array data: `"bf16"` (default) or `"f16"`. Ignored for other types. */
  half?: "bf16" | "f16";
}

/** Counters of one collective kind on one rank since creation or {@link Communicator.resetStats}. */
export interface OpStats {
  /** Number of calls. */
  calls: number;
  /** Bytes this rank sent, by the nominal (ring) definitions of docs/comm.md:
   * all_reduce 2(n−1)/n·B, reduce_scatter and all_gather (n−1)/n·B of the full (n-part) array,
   * all_to_all_v the bytes addressed to other ranks, broadcast B at the root, gather the input
   * bytes at non-roots, scatter (n−1)/n·B at the root, barrier 0. May be fractional. */
  bytesSent: number;
  /** Milliseconds from issue to completion, summed over the calls (collectives in flight at once
   * each count their whole span). */
  timeMs: number;
  /** Milliseconds callers spent blocked in `wait()` on these calls: the communication not hidden
   * behind compute (≤ timeMs; 0 for a collective that had completed before it was waited). */
  waitMs: number;
}

/** A value or a promise of it: a collective's input may still be on its way (e.g. a device read)
 * when the collective is issued; the collective keeps its place in the order and reads the input
 * when it arrives. */
export type Awaitable<T> = T | PromiseLike<T>;

/**
 * The handle of an issued collective (torch.distributed's `Work`). Awaiting the handle is the same
 * as awaiting `wait()`. A failed collective (timeout, mismatch, abort, bad arguments) rejects
 * `wait()` with its error; the issuing call itself never throws.
 */
export interface Work<T> extends PromiseLike<T> {
  /** Completes when the collective has completed on this rank: resolves with its result (the
   * output array) or rejects with its error. May be called any number of times. */
  wait(): Promise<T>;
  /** Whether the collective has completed (successfully or not); never blocks. */
  isCompleted(): boolean;
}

/** The device-independent communicator every transport implements. */
export interface Communicator {
  /** This rank's index in the world, 0 ≤ rank < worldSize. */
  readonly rank: number;
  /** Number of ranks in the job. */
  readonly worldSize: number;
  /** Group of all ranks. */
  readonly world: Group;
  /** Transport name, e.g. `"local"`. */
  readonly transport: string;

  /** The group of the given world ranks (any order; duplicates and out-of-range ranks throw).
   * This rank must be a member. Not a collective: members may create it in any order, and
   * creating the same rank set twice yields groups that share one ordering of collectives. */
  newGroup(ranks: readonly number[], name?: string): Group;

  /** all_reduce in place: every member's `data` becomes the elementwise reduction over members.
   * Lengths must match across members. Returns `data`. */
  allReduce<T extends CommArray>(data: Awaitable<T>, opts?: ReduceOptions): Work<T>;

  /** reduce_scatter: `input` has `n·s` elements (n = group size), viewed as n consecutive parts of
   * `s`; member k receives the reduction of part k into `output` (length `s`, allocated when
   * omitted). Same reduction order and rounding as allReduce. Returns `output`. */
  reduceScatter<T extends CommArray>(input: Awaitable<T>, output?: T, opts?: ReduceOptions): Work<T>;

  /** all_gather: every member contributes `input` (length `s`, equal on all members); `output`
   * (length `n·s`, allocated when omitted) holds member k's input at `[k·s, (k+1)·s)`. */
  allGather<T extends CommArray>(input: Awaitable<T>, output?: T, opts?: CollectiveOptions): Work<T>;

  /** all_to_all_v with uneven counts. `send` holds, contiguously in group order, `sendCounts[j]`
   * elements for member j; `recv` (allocated when omitted, length Σ recvCounts) receives,
   * contiguously in group order, `recvCounts[i]` elements from member i. `recvCounts[i]` must equal
   * member i's `sendCounts[me]`; a mismatch throws on every member naming the pair. Counts are
   * elements, not bytes. Returns `recv`. */
  allToAllV<T extends CommArray>(
    send: T,
    sendCounts: readonly number[],
    recvCounts: readonly number[],
    recv?: T,
    opts?: CollectiveOptions,
  ): Work<T>;

  /** broadcast in place from world rank `root` (a member) to all members; lengths must match. */
  broadcast<T extends CommArray>(data: T, root: number, opts?: CollectiveOptions): Work<T>;

  /** gather to world rank `root`: returns at the root an array of `n·s` with member k's input at
   * `[k·s, (k+1)·s)` (`output` used when given), and `null` on the other members. */
  gather<T extends CommArray>(input: T, root: number, output?: T, opts?: CollectiveOptions): Work<T | null>;

  /** scatter from world rank `root`: the root's `input` (length `n·s`; ignored elsewhere, may be
   * null) is split in n parts and member k receives part k into `output` (length s). */
  scatter<T extends CommArray>(input: T | null, output: T, root: number, opts?: CollectiveOptions): Work<T>;

  /** Completes when every member has issued barrier (and, as every collective, after this rank's
   * earlier collectives). */
  barrier(opts?: CollectiveOptions): Work<void>;

  /** Counters per collective kind since creation or the last reset (a fresh copy). */
  stats(): Record<CollectiveName, OpStats>;
  /** Zero the counters. */
  resetStats(): void;
}
