/**
 * Where the `local` transport keeps call headers (../call-header.ts): before its first barrier,
 * every rank stores what it is calling in its header words of the control block (memory.ts); after
 * that barrier every member reads and compares all members' headers.
 */

import { headerMismatchTable, type CallHeader } from "../call-header.ts";
import { HEADER_BASE, HEADER_WORDS } from "./memory.ts";

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

/** null when every member's stored header equals the first member's; else one row per member
 * (`rank r: <op> <array type> length L root R flags F`), the same on every member. */
export function describeHeaderMismatch(ctl: Int32Array, ranks: readonly number[]): string | null {
  return headerMismatchTable(ranks.map((r) => readCallHeader(ctl, r)), ranks);
}
