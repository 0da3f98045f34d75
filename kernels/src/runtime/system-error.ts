/**
 * System-call errors in Node's shape on both runtimes. Deno's node:fs leaves some errno values
 * unmapped: a write past `ulimit -f` throws `Error("File too large (os error 27)")` with no `code`,
 * where Bun (and Node) throw `EFBIG: file too large, write` with `code: "EFBIG"`. Callers that name
 * the system error to the user (offload's NVMe files) pass errors through {@link withErrnoCode}.
 */
import { constants } from "node:os";
import { RUNTIME } from "./detect.ts";

const NAMES: Map<number, string> = new Map(Object.entries(constants.errno).map(([name, n]) => [Math.abs(n), name]));

/**
 * `e` itself, given the Node `code` ("EFBIG"), negative `errno` and a message starting with the
 * code when it is an Error whose message ends in Rust's "(os error N)" and has no code (Deno);
 * any other value, and every error on Bun, unchanged.
 */
export function withErrnoCode(e: unknown): unknown {
  if (RUNTIME === "bun" || !(e instanceof Error)) return e;
  const err = e as NodeJS.ErrnoException;
  if (err.code !== undefined) return e;
  const m = /\(os error (\d+)\)/.exec(err.message);
  const name = m ? NAMES.get(Number(m[1])) : undefined;
  if (name === undefined) return e;
  err.code = name;
  err.errno = -Number(m![1]);
  err.message = `${name}: ${err.message.charAt(0).toLowerCase()}${err.message.slice(1)}`;
  return e;
}
