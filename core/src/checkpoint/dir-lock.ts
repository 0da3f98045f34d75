/**
 * Lock of a checkpoint directory: one training run writes a `checkpoint.dir` at a time (two runs
 * saving into the same directory replaced each other's tags and rank files mid-save: "trailer magic
 * missing").
 *
 * `<dir>/zeromoe.lock` is created with O_CREAT|O_EXCL (`openSync(path, "wx")`) and holds JSON
 * `{pid, host, started}` (process id, os.hostname(), ISO start time). A run that finds the file:
 * - fails with {@link CheckpointLockError} naming the directory and the holder's pid and host when
 *   the holder may be alive (its pid exists on this host, or it is on another host, which cannot be
 *   checked from here);
 * - takes it over at once, with a warning, when the holder is on this host and its pid no longer
 *   exists or is a zombie (a run killed with SIGKILL and not yet reaped: {@link pidAlive}), or the file is not valid JSON and older
 *   than {@link PARTIAL_LOCK_AGE_MS} (a creator that died between create and write).
 * The takeover re-reads the file just before removing it and removes it only if unchanged, then
 * creates its own with O_EXCL, so of two runs taking over the same stale lock one wins and the
 * other is refused (a remaining window of a few microseconds between the re-read and the unlink
 * is accepted). A reused pid of an unrelated process reads as alive: the error says to delete the
 * lock file when the named run is gone.
 *
 * The holder removes the file on release (normal end, error) and from a `process.on("exit")`
 * handler, which also runs on `process.exit` — the second SIGINT/SIGTERM of stop-signal.ts ends
 * the process that way. The first signal makes the ranks stop and return normally, then release.
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { ConfigError } from "../config/errors.ts";
import { CheckpointWriteError, writingFile } from "./errors.ts";
import { quoteUntrusted } from "../config/quote-untrusted.ts";

/** Name of the lock file inside the checkpoint directory. */
export const LOCK_FILE = "zeromoe.lock";

/** An unparsable lock file younger than this (ms) is taken as one being written, not as stale. */
export const PARTIAL_LOCK_AGE_MS = 5000;

/** Contents of a lock file. */
export interface LockHolder {
  pid: number;
  host: string;
  /** ISO 8601 time the holder took the lock. */
  started: string;
}

/** The directory is locked by another live run. A {@link ConfigError} on `checkpoint.dir` (the
 * key to change), so the train CLI prints the message only and exits with status 2. */
export class CheckpointLockError extends ConfigError {
  constructor(
    /** The lock file. */
    readonly file: string,
    /** Its holder, or null when the file could not be parsed. */
    readonly holder: LockHolder | null,
    message: string,
  ) {
    super([{ path: "checkpoint.dir", message }], "checkpoint directory in use");
  }
}

/** A held lock. */
export interface CheckpointDirLock {
  /** The lock file. */
  readonly file: string;
  readonly holder: LockHolder;
  /** The stale holder this lock replaced, or null. */
  readonly tookOverFrom: LockHolder | null;
  /** Remove the lock file if it is still ours (idempotent). */
  release(): void;
}

/**
 * Whether process `pid` exists on this host and can still run (signal 0: EPERM = exists, owned by
 * someone else). A zombie — a process that has exited but whose parent has not reaped it yet, as a
 * trainer killed with `kill -9` is for a moment — holds nothing and counts as gone: on Linux its
 * state in `/proc/<pid>/stat` is `Z` (or `X`, dead).
 */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  return processState(pid) !== "Z" && processState(pid) !== "X";
}

/** The one-letter state of `pid` from /proc/<pid>/stat (Linux), or null when unknown. */
export function processState(pid: number): string | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return null;
  }
  // "pid (comm) S ...": comm may hold spaces and parentheses, so the state follows the LAST ')'
  const close = stat.lastIndexOf(")");
  return close < 0 ? null : (stat[close + 2] ?? null);
}

/** Parse a lock file's text; null when it is not a {@link LockHolder}. */
function parseHolder(text: string): LockHolder | null {
  try {
    const j = JSON.parse(text) as Partial<LockHolder>;
    if (typeof j.pid === "number" && Number.isInteger(j.pid) && j.pid > 0 && typeof j.host === "string" && typeof j.started === "string") return { pid: j.pid, host: j.host, started: j.started };
  } catch {
    // not JSON
  }
  return null;
}

/** Read the file's text, or null when it vanished. */
function readText(file: string): string | null {
  try {
    return readFileSync(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw e;
  }
}

/** Create the lock file exclusively with `text`; false when it already exists.
 * @throws CheckpointWriteError naming the file when it cannot be created or written (disk full,
 *   read-only file system, …); a file created but not written is removed first (left empty, it
 *   would refuse the next run for {@link PARTIAL_LOCK_AGE_MS} as one being written). */
function createExclusive(file: string, text: string): boolean {
  let fd: number;
  try {
    fd = writingFile(file, "create the lock file", () => openSync(file, "wx", 0o644));
  } catch (e) {
    if (e instanceof CheckpointWriteError && e.code === "EEXIST") return false;
    throw e;
  }
  try {
    writingFile(file, "write the lock file", () => {
      writeSync(fd, text);
      fsyncSync(fd);
    });
  } catch (e) {
    closeSync(fd);
    try {
      unlinkSync(file);
    } catch {
      // already gone
    }
    throw e;
  }
  closeSync(fd);
  return true;
}

/** Who holds `<dir>/zeromoe.lock` now, or null when nobody (or the file is not a valid lock). */
export function readLockHolder(dir: string): LockHolder | null {
  const text = readText(join(dir, LOCK_FILE));
  return text === null ? null : parseHolder(text);
}

/**
 * Why another process's lock forbids writing `dir` now, or null: the lock is held by another
 * process that may be alive (same host and pid alive, or another host). Used by saveCheckpoint,
 * so that a save outside the trainer (a script calling engine.saveCheckpoint) does not write into a
 * directory a training run holds; a stale lock (holder gone) does not block it.
 */
export function lockConflict(dir: string): string | null {
  const file = join(resolve(dir), LOCK_FILE);
  const h = readLockHolder(dir);
  if (h === null) return null;
  const here = hostname();
  if (h.host === here && (h.pid === process.pid || !pidAlive(h.pid))) return null;
  return `is locked by the run with pid ${h.pid} on host ${h.host}, since ${h.started} (${file}); two runs writing one checkpoint directory corrupt each other's tags`;
}

/**
 * Take the lock of checkpoint directory `dir` (created if missing), see the module comment.
 * @param warn receives the takeover warning of a stale lock.
 * @throws CheckpointLockError when another live run (or one on another host) holds it;
 *   CheckpointWriteError naming the lock file when it cannot be created or written (disk full,
 *   read-only file system, …: the train CLI prints it without a stack, exit 1); fs errors of the
 *   directory's creation.
 */
export function acquireCheckpointLock(dir: string, warn: (message: string) => void = () => {}): CheckpointDirLock {
  const abs = resolve(dir);
  mkdirSync(abs, { recursive: true });
  const file = join(abs, LOCK_FILE);
  const holder: LockHolder = { pid: process.pid, host: hostname(), started: new Date().toISOString() };
  const text = JSON.stringify(holder) + "\n";
  let tookOverFrom: LockHolder | null = null;
  for (let attempt = 0; ; attempt++) {
    if (createExclusive(file, text)) break;
    const found = readText(file);
    if (found === null) continue; // released meanwhile: try again
    const h = parseHolder(found);
    let stale: string | null = null;
    if (h === null) {
      const age = Date.now() - statSync(file).mtimeMs;
      if (age >= PARTIAL_LOCK_AGE_MS) stale = `its lock file ${file} is not a valid lock (${quoteUntrusted(found)}) and ${Math.round(age / 1000)} s old`;
    } else if (h.host === holder.host && h.pid !== process.pid && !pidAlive(h.pid)) {
      stale = `the run that held it (pid ${h.pid} on ${h.host}, since ${h.started}) is gone`;
    }
    if (stale === null || attempt >= 3) {
      const who = h === null ? `a run that is writing its lock file ${file} now` : `the run with pid ${h.pid} on host ${h.host}${h.pid === process.pid && h.host === holder.host ? " (this process)" : ""}, since ${h.started}`;
      throw new CheckpointLockError(file, h, `${abs} is in use by ${who}: wait for it to finish, set another checkpoint.dir, or delete ${file} if that run is gone`);
    }
    // take over only the file we judged stale (re-read just before removing it)
    if (readText(file) === found) {
      try {
        unlinkSync(file);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
      }
    }
    tookOverFrom = h;
    warn(`checkpoint.dir ${abs}: taking over a stale lock: ${stale}`);
  }
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    process.off("exit", release);
    try {
      if (existsSync(file) && readText(file) === text) unlinkSync(file);
    } catch {
      // already gone or not ours: nothing to remove
    }
  };
  process.on("exit", release);
  return { file, holder, tookOverFrom, release };
}
