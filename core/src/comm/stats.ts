/**
 * Per-rank byte and time accounting of collectives.
 *
 * Bytes "sent" are nominal, defined by the ring algorithms of the ZeRO paper (Rajbhandari et al.,
 * SC'20, §7; docs/domain.md §2) so that figures compare with the paper's communication volumes whatever
 * the transport really does. For a group of n members and an array of B bytes:
 * - all_reduce: 2(n−1)/n · B (B = the array reduced).
 * - reduce_scatter: (n−1)/n · B (B = the full input array, n parts).
 * - all_gather: (n−1)/n · B (B = the full output array, n parts).
 * - all_to_all_v: the bytes this rank addresses to other members (its own part is not counted).
 * - broadcast: B at the root, 0 elsewhere. gather: B_input at non-roots, 0 at the root.
 *   scatter: (n−1)/n · B at the root (B = the full input), 0 elsewhere. barrier: 0.
 */

import { COLLECTIVE_NAMES, type CollectiveName, type OpStats } from "./communicator.ts";

/** Nominal bytes of a ring all_reduce per rank: 2(n−1)/n · bytes. */
export function ringAllReduceBytes(bytes: number, n: number): number {
  return (2 * (n - 1) * bytes) / n;
}

/** Nominal bytes of a ring reduce_scatter or all_gather per rank: (n−1)/n · bytes of the full array. */
export function ringShardBytes(bytes: number, n: number): number {
  return ((n - 1) * bytes) / n;
}

/** Nominal bytes of all_to_all_v per rank: the `sentElems` elements of `send` minus the `selfElems`
 * this rank addresses to itself, times `bytesPerElement`. */
export function allToAllVSentBytes(sentElems: number, selfElems: number, bytesPerElement: number): number {
  return (sentElems - selfElems) * bytesPerElement;
}

/** Nominal bytes of broadcast per rank: `bytes` at the root of a group of n > 1 members, else 0. */
export function broadcastSentBytes(bytes: number, n: number, isRoot: boolean): number {
  return isRoot && n > 1 ? bytes : 0;
}

/** Nominal bytes of gather per rank: `inputBytes` at a non-root, 0 at the root. */
export function gatherSentBytes(inputBytes: number, isRoot: boolean): number {
  return isRoot ? 0 : inputBytes;
}

/** Nominal bytes of scatter per rank: (n−1)/n · `fullBytes` (the root's whole input) at the root,
 * 0 elsewhere. */
export function scatterSentBytes(fullBytes: number, n: number, isRoot: boolean): number {
  return isRoot ? ringShardBytes(fullBytes, n) : 0;
}

/** Accumulates {@link OpStats} per collective kind. */
export class CommStats {
  private table: Record<CollectiveName, OpStats> = CommStats.empty();

  private static empty(): Record<CollectiveName, OpStats> {
    const t = {} as Record<CollectiveName, OpStats>;
    for (const n of COLLECTIVE_NAMES) t[n] = { calls: 0, bytesSent: 0, timeMs: 0, waitMs: 0 };
    return t;
  }

  /** Record one call of `op` that sent `bytesSent` nominal bytes, took `timeMs` milliseconds from
   * issue to completion and kept a caller blocked in wait() for `waitMs` of them. */
  record(op: CollectiveName, bytesSent: number, timeMs: number, waitMs = timeMs): void {
    const s = this.table[op];
    s.calls++;
    s.bytesSent += bytesSent;
    s.timeMs += timeMs;
    s.waitMs += Math.min(waitMs, timeMs);
  }

  /** A deep copy of the counters. */
  snapshot(): Record<CollectiveName, OpStats> {
    const t = {} as Record<CollectiveName, OpStats>;
    for (const n of COLLECTIVE_NAMES) t[n] = { ...this.table[n] };
    return t;
  }

  /** Zero every counter. */
  reset(): void {
    this.table = CommStats.empty();
  }
}
