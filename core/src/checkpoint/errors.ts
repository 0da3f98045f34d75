/** Errors of the sharded checkpoint format (core/src/checkpoint). */
import { pathForMessage, quoteUntrusted } from "../config/quote-untrusted.ts";

/** A checkpoint file or directory is malformed, corrupted, incomplete or does not fit the job.
 * The message names the file and, where there is one, the record (both rendered by
 * config/quote-untrusted.ts: a record name is read from the file, so it is quoted and bounded). */
export class CheckpointError extends Error {
  override readonly name = "CheckpointError";
  constructor(
    /** File (or directory) concerned. */
    readonly file: string,
    message: string,
    /** Record name inside the file, when the problem is one record. */
    readonly record?: string,
  ) {
    super(`${pathForMessage(file)}${record !== undefined ? `: record ${quoteUntrusted(record)}` : ""}: ${message}`);
  }
}

/** Writing a checkpoint file failed in the environment (disk full, quota, read-only file system,
 * permissions): not a bug and not bad input. The message names the file and the system error
 * (code and text); the train CLI prints it without a stack trace and exits with status 1. */
export class CheckpointWriteError extends Error {
  override readonly name = "CheckpointWriteError";
  constructor(
    /** File being written. */
    readonly file: string,
    /** The system error code (ENOSPC, EDQUOT, EROFS, EACCES, …), or "" when none. */
    readonly code: string,
    message: string,
  ) {
    super(`${pathForMessage(file)}: ${message}`);
  }
}

/** Human text of the common write failures. */
const WRITE_CODES: Readonly<Record<string, string>> = {
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
  EROFS: "read-only file system",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EIO: "input/output error",
  EFBIG: "file too large",
};

/** Run `f` (a write of `file`); a system error becomes a {@link CheckpointWriteError} naming the
 * file and what was being done. Other errors pass through unchanged. */
export function writingFile<T>(file: string, what: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException)?.code;
    if (typeof code !== "string" || e instanceof CheckpointError || e instanceof CheckpointWriteError) throw e;
    throw new CheckpointWriteError(file, code, `cannot ${what}: ${WRITE_CODES[code] ?? (e as Error).message} (${code})`);
  }
}
