/** Errors of the sharded checkpoint format (core/src/checkpoint). */

/** A checkpoint file or directory is malformed, corrupted, incomplete or does not fit the job.
 * The message names the file and, where there is one, the record. */
export class CheckpointError extends Error {
  override readonly name = "CheckpointError";
  constructor(
    /** File (or directory) concerned. */
    readonly file: string,
    message: string,
    /** Record name inside the file, when the problem is one record. */
    readonly record?: string,
  ) {
    super(`${file}${record !== undefined ? `: record "${record}"` : ""}: ${message}`);
  }
}
