/**
 * System errors of the offload files, named by their file: Node's fs errors say what failed
 * ("ENOSPC: no space left on device, write") but not on which file.
 */
import { withErrnoCode } from "@zeromoe/kernels/runtime";

/**
 * `e` with `: <path>` appended to its message when it is an Error and `path` is given (mutated and
 * returned; anything else is returned as is). The message still starts with the error's code, e.g.
 * "ENOSPC: no space left on device, pwritev: /nvme/…/embed.optim", which train reports without a
 * stack.
 */
export function withPath(e: unknown, path: string | undefined): unknown {
  withErrnoCode(e); // Deno: the code Node and Bun give (EFBIG…) where its node:fs has none
  if (path && e instanceof Error) e.message = `${e.message}: ${path}`;
  return e;
}
