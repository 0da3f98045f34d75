/**
 * Per-rank call headers of the `local` transport: before its first barrier, every rank stores what
 * it is calling (op, array type, length, root, reduction flags) in its header words of the control
 * block (memory.ts); after that barrier every member compares all members' headers, so
 * disagreeing calls fail on every member with the same table instead of exchanging garbage.
 */

import type { CollectiveName, CommArray } from "../communicator.ts";
import { HEADER_BASE, HEADER_WORDS } from "./memory.ts";

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

/** Store world rank `rank`'s header. */
export function writeCallHeader(ctl: Int32Array, rank: number, h: CallHeader): void {
  const b = HEADER_BASE + HEADER_WORDS * rank;
  Atomics.store(ctl, b, h.op);
  Atomics.store(ctl, b + 1, h.dtype);
  Atomics.store(ctl, b + 2, h.length | 0);
  Atomics.store(ctl, b + 3, h.root);
  Atomics.store(ctl, b + 4, h.flags);
}

/** Load world rank `rank`'s header. */
export function readCallHeader(ctl: Int32Array, rank: number): CallHeader {
  const b = HEADER_BASE + HEADER_WORDS * rank;
  return {
    op: Atomics.load(ctl, b),
    dtype: Atomics.load(ctl, b + 1),
    length: Atomics.load(ctl, b + 2) >>> 0,
    root: Atomics.load(ctl, b + 3),
    flags: Atomics.load(ctl, b + 4),
  };
}

/** `<op> <array type> length L root R flags F` for logs and errors. */
export function describeCallHeader(h: CallHeader): string {
  return `${OP_NAMES[h.op] ?? `op#${h.op}`} ${DTYPE_NAMES[h.dtype] ?? "?"} length ${h.length} root ${h.root} flags ${h.flags}`;
}

/** null when every member's header equals the first member's; else one row per member
 * (`rank r: <op> <array type> length L root R flags F`), the same on every member. */
export function describeHeaderMismatch(ctl: Int32Array, ranks: readonly number[]): string | null {
  const hs = ranks.map((r) => readCallHeader(ctl, r));
  const h0 = hs[0];
  const same = hs.every((h) => h.op === h0.op && h.dtype === h0.dtype && h.length === h0.length && h.root === h0.root && h.flags === h0.flags);
  if (same) return null;
  return hs.map((h, i) => `rank ${ranks[i]}: ${describeCallHeader(h)}`).join("; ");
}
