/** Errors raised by collectives. Messages name the op, the group and the ranks concerned. */

/** A collective waited longer than its timeout for some members. `missing` are world ranks. */
export class CommTimeoutError extends Error {
  override readonly name = "CommTimeoutError";
  constructor(
    readonly op: string,
    readonly group: string,
    readonly missing: readonly number[],
    readonly timeoutS: number,
    rank: number,
    /** What the rank waited for them to do (default: to arrive, i.e. enter the call). */
    waitingFor = "to arrive",
  ) {
    super(
      `${op} on group ${group} (rank ${rank}): timed out after ${timeoutS} s waiting for rank(s) ` +
        `[${missing.join(", ")}] ${waitingFor} (set ZEROMOE_COMM_TIMEOUT_S or the launch option timeoutS to change the limit)`,
    );
  }
}

/** The job was aborted (another rank failed) while this rank was inside a collective. */
export class CommAbortedError extends Error {
  override readonly name = "CommAbortedError";
  constructor(
    readonly op: string,
    readonly group: string,
    /** World rank that failed first, or -1 when the launcher aborted without a failing rank. */
    readonly failedRank: number,
    rank: number,
  ) {
    super(
      `${op} on group ${group} (rank ${rank}): aborted because ` +
        (failedRank >= 0 ? `rank ${failedRank} failed` : "the job was aborted"),
    );
  }
}

/** Members this rank waits for have already returned from their entry function: they will never
 * arrive (a rank skipped a collective the others called). `gone` are world ranks. */
export class CommPeerFinishedError extends Error {
  override readonly name = "CommPeerFinishedError";
  constructor(
    readonly op: string,
    readonly group: string,
    readonly gone: readonly number[],
    rank: number,
  ) {
    super(
      `${op} on group ${group} (rank ${rank}): rank(s) [${gone.join(", ")}] already returned from their entry ` +
        `function without calling it (every member must call the same collectives in the same order)`,
    );
  }
}

/** Members called a collective with disagreeing arguments (op kind, dtype, length or root). */
export class CommMismatchError extends Error {
  override readonly name = "CommMismatchError";
}
