/**
 * The trainer dies with its launcher: a process whose parent is gone is re-parented (to PID 1 or a
 * subreaper), so `process.ppid` changes. {@link watchParent} polls it and calls back once when it
 * does — e.g. when the `bun run train` wrapper (or the shell, a supervisor, an MPI launcher's
 * daemon) was killed with SIGKILL and could not forward a signal. Without it the trainer kept
 * training unseen, holding the checkpoint directory's lock (issue 18).
 *
 * Polling (default every {@link PARENT_POLL_MS} ms, an unref'd timer on the main thread, which is
 * idle while the ranks run in workers) is portable; Linux's PR_SET_PDEATHSIG would fire when the
 * parent *thread* exits, which is not what is meant. A process started with parent PID 1 (a
 * container's entry point) or with `ZEROMOE_KEEP_ORPHAN=1` in the environment (`nohup`-style runs
 * meant to outlive their shell) is not watched.
 */

/** Poll interval of {@link watchParent}, ms. */
export const PARENT_POLL_MS = 500;

/** Exit status of a trainer whose launcher went away (128 + SIGHUP, as a terminal hangup). */
export const EXIT_ORPHANED = 129;

/**
 * Call `onOrphaned` once when this process's parent changes (see the module comment).
 * @returns a function that stops watching.
 */
export function watchParent(onOrphaned: (oldParent: number) => void, pollMs = PARENT_POLL_MS): () => void {
  const parent = process.ppid;
  if (parent <= 1 || process.env.ZEROMOE_KEEP_ORPHAN === "1") return () => {};
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onOrphaned(parent);
  }, pollMs);
  timer.unref();
  return () => clearInterval(timer);
}
