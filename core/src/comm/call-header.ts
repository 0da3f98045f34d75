/**
 * Call headers: what a rank says it is calling (op, array type, length, root, reduction flags),
 * compared across the members of a group before any data moves so that disagreeing calls fail on
 * every member with the same table instead of exchanging garbage (docs/comm.md "The contract").
 * Transport-independent: `local` keeps headers in its shared control block (local/call-header.ts),
 * `mpi` exchanges them as messages (mpi/mpi-communicator.ts).
 */

import type { CollectiveName, CommArray } from "./communicator.ts";
import { CommMismatchError } from "./errors.ts";

/** Numeric codes of the collectives in headers. */
export const OP_CODES: Readonly<Record<CollectiveName, number>> = {
  all_reduce: 1,
  reduce_scatter: 2,
  all_gather: 3,
  all_to_all_v: 4,
  broadcast: 5,
  gather: 6,
  scatter: 7,
  barrier: 8,
};

const OP_NAMES: Record<number, string> = Object.fromEntries(Object.entries(OP_CODES).map(([k, v]) => [v, k]));
const DTYPE_NAMES = ["none", "Float32Array", "Float64Array", "Uint16Array", "Int32Array", "Uint32Array"];

/** Code of a host array's type: 1 Float32Array, 2 Float64Array, 3 Uint16Array, 4 Int32Array,
 * 5 Uint32Array. Throws a TypeError naming the type for anything else. */
export function dtypeCode(a: CommArray): number {
  if (a instanceof Float32Array) return 1;
  if (a instanceof Float64Array) return 2;
  if (a instanceof Uint16Array) return 3;
  if (a instanceof Int32Array) return 4;
  if (a instanceof Uint32Array) return 5;
  throw new TypeError(
    `comm: unsupported array type ${(a as object)?.constructor?.name}; expected Float32Array, Float64Array, Uint16Array, Int32Array or Uint32Array`,
  );
}

/** What a rank is calling. `length` is in elements (< 2³²); `flags` encodes reduction options. */
export interface CallHeader {
  op: number;
  dtype: number;
  length: number;
  root: number;
  flags: number;
}

/** `<op> <array type> length L root R flags F` for logs and errors. */
export function describeCallHeader(h: CallHeader): string {
  return `${OP_NAMES[h.op] ?? `op#${h.op}`} ${DTYPE_NAMES[h.dtype] ?? "?"} length ${h.length} root ${h.root} flags ${h.flags}`;
}

/** Row of the mismatch table for member world rank `rank`: `rank r: <op> <array type> length L …`. */
export function describeMemberCall(h: CallHeader, rank: number): string {
  return `rank ${rank}: ${describeCallHeader(h)}`;
}

/** null when every member's header (`headers[j]` of world rank `ranks[j]`) equals the first
 * member's; else one row per member joined by "; " (`row`, default {@link describeMemberCall}),
 * the same text on every member. */
export function headerMismatchTable(
  headers: readonly CallHeader[],
  ranks: readonly number[],
  row: (h: CallHeader, rank: number) => string = describeMemberCall,
): string | null {
  const h0 = headers[0];
  const same = headers.every((h) => h.op === h0.op && h.dtype === h0.dtype && h.length === h0.length && h.root === h0.root && h.flags === h0.flags);
  if (same) return null;
  return headers.map((h, i) => row(h, ranks[i])).join("; ");
}

/** The error every member of group `group` throws when the members' headers disagree (`table`
 * from {@link headerMismatchTable}); `rank` is this rank's world rank. */
export function callMismatchError(op: CollectiveName, group: string, rank: number, table: string): CommMismatchError {
  return new CommMismatchError(`${op} on group ${group} (rank ${rank}): members disagree on the call: ${table}`);
}

/** Prints each collective call to stderr as it starts (option `trace`, env ZEROMOE_COMM_TRACE=1),
 * numbered from 1 per communicator, to find where ranks diverge. Counts only while enabled. */
export class CallTrace {
  private calls = 0;
  constructor(
    private readonly rank: number,
    readonly enabled: boolean,
  ) {}

  /** Log `h` called on group `group` when enabled: `[comm] rank R call N: <header> on group G`. */
  note(h: CallHeader, group: string): void {
    if (!this.enabled) return;
    this.calls++;
    console.error(`[comm] rank ${this.rank} call ${this.calls}: ${describeCallHeader(h)} on group ${group}`);
  }
}
