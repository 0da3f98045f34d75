/**
 * The `local` transport's environment variables, checked by `bun run train` before anything starts
 * (they are user input: a bad value is exit 2 naming it, not a stack trace from the launcher):
 * `ZEROMOE_COMM_TIMEOUT_S` (collective timeout, seconds) and `ZEROMOE_COMM_ARENA_MB` (shared arena
 * per rank, MiB; docs/comm.md).
 */
import { totalmem } from "node:os";
import { slotBytesFromEnv } from "../comm/local/memory.ts";
import { timeoutMsFromEnv } from "../comm/transport-options.ts";

/**
 * What is wrong with the transport variables of `env` for a job of `worldSize` ranks, or null: a
 * value that is not a positive number (the transports' own message, naming the variable and the
 * value), or an arena whose total over the ranks (`worldSize` × ZEROMOE_COMM_ARENA_MB MiB, one
 * SharedArrayBuffer) exceeds this host's memory (`os.totalmem()`), which would fail allocating it.
 */
export function commEnvProblem(env: Record<string, string | undefined>, worldSize: number): string | null {
  let slotBytes: number;
  try {
    timeoutMsFromEnv(env);
    slotBytes = slotBytesFromEnv(worldSize, env);
  } catch (e) {
    return (e as Error).message;
  }
  const v = env.ZEROMOE_COMM_ARENA_MB;
  if (v !== undefined && v !== "" && slotBytes * worldSize > totalmem()) {
    const gib = (b: number): string => (b / 2 ** 30).toFixed(1);
    return `ZEROMOE_COMM_ARENA_MB=${v}: ${worldSize} rank${worldSize === 1 ? "" : "s"} × ${v} MiB of shared arena exceeds this host's memory (${gib(slotBytes * worldSize)} GiB > ${gib(totalmem())} GiB); the default (unset) is 16 MiB per rank`;
  }
  return null;
}
