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
 *
 * A rank under `bun run train --launcher mpi` has mpirun as its parent, and mpirun outlives a
 * launcher killed with SIGKILL. So the launcher also names itself in the ranks' environment
 * ({@link LAUNCHER_PID_ENV}, {@link LAUNCHER_HOST_ENV}, forwarded by mpirun's `-x`) and a rank on
 * the launcher's host watches that pid too; when it is gone the rank exits, and mpirun, seeing a
 * rank fail, ends the others on every host.
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";

/** Poll interval of {@link watchParent}, ms. */
export const PARENT_POLL_MS = 500;

/** Exit status of a trainer whose launcher went away (128 + SIGHUP, as a terminal hangup). */
export const EXIT_ORPHANED = 129;

/** Environment variable naming the pid of the `--launcher mpi` process (cli/mpi-launcher.ts). */
export const LAUNCHER_PID_ENV = "ZEROMOE_LAUNCHER_PID";

/** Environment variable naming the host of that process (`os.hostname()`). */
export const LAUNCHER_HOST_ENV = "ZEROMOE_LAUNCHER_HOST";

/** The launcher pid from the environment when it runs on this host (and is not this process), else null. */
function launcherOnThisHost(): number | null {
  const pid = Number(process.env[LAUNCHER_PID_ENV]);
  if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid || process.env[LAUNCHER_HOST_ENV] !== hostname()) return null;
  return pid;
}

/** Whether `pid` exists and is not a zombie (Linux: state `Z`/`X` in /proc/<pid>/stat). */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const state = stat[stat.lastIndexOf(")") + 2];
    return state !== "Z" && state !== "X";
  } catch {
    return true; // no /proc (macOS): signal 0 answered
  }
}

/**
 * Call `onOrphaned` once when this process's parent changes, or when the launcher named in the
 * environment on this host is gone (see the module comment).
 * @param onOrphaned receives the pid of the process that went away and which one it was: this
 *   process's parent, or the `--launcher mpi` process named in the environment.
 * @returns a function that stops watching.
 */
export function watchParent(onOrphaned: (gone: number, what: "parent" | "launcher") => void, pollMs = PARENT_POLL_MS): () => void {
  if (process.env.ZEROMOE_KEEP_ORPHAN === "1") return () => {};
  const parent = process.ppid;
  const launcher = launcherOnThisHost();
  if (parent <= 1 && launcher === null) return () => {};
  const timer = setInterval(() => {
    if (parent > 1 && process.ppid !== parent) {
      clearInterval(timer);
      onOrphaned(parent, "parent");
    } else if (launcher !== null && !processAlive(launcher)) {
      clearInterval(timer);
      onOrphaned(launcher, "launcher");
    }
  }, pollMs);
  timer.unref();
  return () => clearInterval(timer);
}
