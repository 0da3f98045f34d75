/**
 * all_to_all_v's count agreement, on every transport: each member publishes one row of its counts
 * (what it sends to each member, then what it expects from each), every member sees all rows, and
 * sender i's `sendCounts[j]` must equal receiver j's `recvCounts[i]` for every pair before any data
 * moves (communicator.ts `allToAllV`; docs/comm.md "The contract").
 */

import { CommMismatchError } from "./errors.ts";

/** Write this member's row into `row` (length 2n, n = group size): `sendCounts` at [0, n),
 * `recvCounts` at [n, 2n). Float64 holds every count exactly up to 2^53. */
export function packCountRow(row: Float64Array, sendCounts: readonly number[], recvCounts: readonly number[]): void {
  const n = sendCounts.length;
  for (let j = 0; j < n; j++) {
    row[j] = sendCounts[j];
    row[n + j] = recvCounts[j];
  }
}

/** Check the rows of all n members (`rows[i]` from member i, world rank `ranks[i]`, as
 * {@link packCountRow} wrote it). `maxCount`: the largest count one member sends another (its own
 * part excluded). `error`: a CommMismatchError naming every disagreeing pair (`<where>: send/recv
 * counts disagree: rank a sends x to rank b, which expects y; …`), or null when all pairs agree;
 * the caller throws it when the transport allows (the same text on every member). */
export function checkCountRows(
  rows: readonly ArrayLike<number>[],
  ranks: readonly number[],
  where: string,
): { maxCount: number; error: CommMismatchError | null } {
  const n = rows.length;
  let maxCount = 0;
  const problems: string[] = [];
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const sent = rows[i][j];
      const expected = rows[j][n + i];
      if (sent !== expected) problems.push(`rank ${ranks[i]} sends ${sent} to rank ${ranks[j]}, which expects ${expected}`);
      if (i !== j && sent > maxCount) maxCount = sent;
    }
  }
  const error = problems.length > 0 ? new CommMismatchError(`${where}: send/recv counts disagree: ${problems.join("; ")}`) : null;
  return { maxCount, error };
}
