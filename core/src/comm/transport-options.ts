/**
 * Options every transport's communicator takes (the collective timeout and call tracing), with
 * their environment defaults: ZEROMOE_COMM_TIMEOUT_S and ZEROMOE_COMM_TRACE (docs/comm.md).
 */

/** Options of a communicator, on every transport. */
export interface TransportOptions {
  /** Longest wait for the other members of a collective before it fails, ms (on `local`: at any
   * barrier; on `mpi`: for their call headers). Default: env ZEROMOE_COMM_TIMEOUT_S (seconds) or
   * 300 s. */
  timeoutMs?: number;
  /** Print every collective call (rank, call number, op, array type, length, group) to stderr as it
   * starts, to find where ranks diverge. Default: env ZEROMOE_COMM_TRACE=1. */
  trace?: boolean;
}

/** Collective timeout from env ZEROMOE_COMM_TIMEOUT_S (seconds), default 300 s; returns ms.
 * @param env the environment to read (default `process.env`).
 * @throws when the variable is set but not a positive number. */
export function timeoutMsFromEnv(env: Record<string, string | undefined> = process.env): number {
  const v = env.ZEROMOE_COMM_TIMEOUT_S;
  if (v === undefined || v === "") return 300_000;
  const s = Number(v);
  if (!Number.isFinite(s) || s <= 0) throw new Error(`ZEROMOE_COMM_TIMEOUT_S must be a positive number of seconds, got "${v}"`);
  return s * 1000;
}

/** `opts` with every default filled in: timeout in ms and whether to trace calls.
 * @throws like {@link timeoutMsFromEnv} when the timeout comes from a malformed env variable. */
export function resolveTransportOptions(opts: TransportOptions): { timeoutMs: number; trace: boolean } {
  return {
    timeoutMs: opts.timeoutMs ?? timeoutMsFromEnv(),
    trace: opts.trace ?? process.env.ZEROMOE_COMM_TRACE === "1",
  };
}
