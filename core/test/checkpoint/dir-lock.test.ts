/**
 * Checkpoint directory lock (core/src/checkpoint/dir-lock.ts) and the resume data-stream warning
 * (core/src/train/resume-config.ts).
 *
 * Regression: two runs with the same checkpoint.dir overwrote each other's tags mid-save
 * ("trailer magic missing"). Now the second run fails at start naming the directory and the
 * holder's pid; a lock left by a dead process is taken over with a warning; the lock goes away on a
 * normal end, a clean SIGTERM stop and the "second signal" exit.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { acquireCheckpointLock, CheckpointLockError, LOCK_FILE, lockConflict, PARTIAL_LOCK_AGE_MS, readLockHolder } from "../../src/checkpoint/dir-lock.ts";
import { ConfigError } from "../../src/config/errors.ts";
import { resolveJobConfig } from "../../src/config/resolve.ts";
import { launch } from "../../src/launch/index.ts";
import { dataStreamChanges } from "../../src/train/resume-config.ts";
import { awkwardModel, tinyJob } from "../engine/fixtures.ts";
import { CKPT_ENTRY, type RunOut } from "./fixture.ts";
import { thrown } from "./thrown.ts";
import { TINY_LLAMA_CLI_JOB } from "../tiny-llama-cli.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-lock-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const TRAIN = resolve(import.meta.dir, "../../src/cli/train.ts");
const DIR_LOCK = resolve(import.meta.dir, "../../src/checkpoint/dir-lock.ts");
const STOP_SIGNAL = resolve(import.meta.dir, "../../src/train/stop-signal.ts");
let n = 0;
const fresh = (): string => join(ROOT, `d${n++}`);

const JOB = { ...TINY_LLAMA_CLI_JOB, steps: 100000, steps_per_print: 100000 };

/** The pid of a process that has exited (reaped), so no process has it (short of reuse). */
async function deadPid(): Promise<number> {
  const p = Bun.spawn(["true"]);
  await p.exited;
  return p.pid;
}

/** The error `f` throws. */

describe("acquireCheckpointLock", () => {
  test("O_EXCL lock with pid, host, start time; a second taker is refused naming dir and pid; release removes it", () => {
    const dir = fresh();
    const lock = acquireCheckpointLock(dir);
    const file = join(dir, LOCK_FILE);
    const h = JSON.parse(readFileSync(file, "utf8")) as { pid: number; host: string; started: string };
    expect(h).toEqual({ pid: process.pid, host: hostname(), started: lock.holder.started });
    expect(Math.abs(Date.parse(h.started) - Date.now())).toBeLessThan(60_000);
    const err = thrown(() => acquireCheckpointLock(dir));
    expect(err).toBeInstanceOf(CheckpointLockError);
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.message).toContain(`checkpoint.dir: ${resolve(dir)} is in use by the run with pid ${process.pid} on host ${hostname()} (this process)`);
    expect(err.message).toContain(`delete ${file} if that run is gone`);
    lock.release();
    expect(existsSync(file)).toBe(false);
    lock.release(); // idempotent
    acquireCheckpointLock(dir).release();
  });

  test("a live holder in another process blocks; saveCheckpoint's check (lockConflict) names it", async () => {
    const dir = fresh();
    mkdirSync(dir);
    const other = Bun.spawn(["sleep", "30"]);
    try {
      writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: other.pid, host: hostname(), started: "2026-11-29T08:00:00.000Z" }));
      const err = thrown(() => acquireCheckpointLock(dir));
      expect(err.message).toContain(`is in use by the run with pid ${other.pid} on host ${hostname()}, since 2026-11-29T08:00:00.000Z`);
      expect(lockConflict(dir)).toContain(`locked by the run with pid ${other.pid}`);
    } finally {
      other.kill();
      await other.exited;
    }
    // the holder is gone now: stale, no conflict for a save
    expect(lockConflict(dir)).toBeNull();
  });

  test("stale lock (holder pid gone on this host) is taken over with a warning", async () => {
    const dir = fresh();
    mkdirSync(dir);
    const pid = await deadPid();
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid, host: hostname(), started: "2026-11-29T07:00:00.000Z" }));
    const warnings: string[] = [];
    const lock = acquireCheckpointLock(dir, (m) => warnings.push(m));
    expect(lock.tookOverFrom?.pid).toBe(pid);
    expect(warnings).toEqual([`checkpoint.dir ${resolve(dir)}: taking over a stale lock: the run that held it (pid ${pid} on ${hostname()}, since 2026-11-29T07:00:00.000Z) is gone`]);
    expect(readLockHolder(dir)?.pid).toBe(process.pid);
    lock.release();
  });

  test("a holder on another host is never taken over (its pid cannot be checked from here)", async () => {
    const dir = fresh();
    mkdirSync(dir);
    const pid = await deadPid();
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid, host: `${hostname()}-other`, started: "x" }));
    expect(() => acquireCheckpointLock(dir)).toThrow(`is in use by the run with pid ${pid} on host ${hostname()}-other`);
    expect(lockConflict(dir)).not.toBeNull();
  });

  test("an unparsable lock file: refused while fresh, taken over once old", () => {
    const dir = fresh();
    mkdirSync(dir);
    const file = join(dir, LOCK_FILE);
    writeFileSync(file, "{\"pid\": 12");
    expect(() => acquireCheckpointLock(dir)).toThrow(`is in use by a run that is writing its lock file ${file} now`);
    const old = (Date.now() - PARTIAL_LOCK_AGE_MS - 3000) / 1000;
    utimesSync(file, old, old);
    const warnings: string[] = [];
    const lock = acquireCheckpointLock(dir, (m) => warnings.push(m));
    expect(warnings[0]).toMatch(/taking over a stale lock: its lock file .* is not a valid lock .* and \d+ s old/);
    lock.release();
  });

  test("release leaves a lock that is no longer ours", () => {
    const dir = fresh();
    const lock = acquireCheckpointLock(dir);
    const theirs = JSON.stringify({ pid: 1, host: "elsewhere", started: "y" });
    writeFileSync(lock.file, theirs);
    lock.release();
    expect(readFileSync(lock.file, "utf8")).toBe(theirs);
  });

  test("a second SIGINT (process.exit(130) by the stop handlers) removes the lock", async () => {
    const dir = fresh();
    const script = join(ROOT, "holder.ts");
    writeFileSync(script, [
      `import { acquireCheckpointLock } from ${JSON.stringify(DIR_LOCK)};`,
      `import { createStopFlag, installStopHandlers } from ${JSON.stringify(STOP_SIGNAL)};`,
      `acquireCheckpointLock(${JSON.stringify(dir)});`,
      `installStopHandlers(createStopFlag());`,
      `console.log("ready");`,
      `setInterval(() => {}, 1000);`,
    ].join("\n"));
    const child = Bun.spawn(["bun", script], { stdout: "pipe", stderr: "pipe" });
    const reader = child.stdout.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain("ready");
    expect(readLockHolder(dir)?.pid).toBe(child.pid);
    child.kill("SIGINT");
    await Bun.sleep(700); // past the 500 ms window in which a repeat is the same request
    expect(existsSync(join(dir, LOCK_FILE))).toBe(true);
    child.kill("SIGINT");
    expect(await child.exited).toBe(130);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  });
});

test("saveCheckpoint refuses a directory whose lock another live process holds, and writes nothing", async () => {
  const dir = fresh();
  mkdirSync(dir);
  const other = Bun.spawn(["sleep", "30"]);
  try {
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: other.pid, host: hostname(), started: "z" }));
    const job = tinyJob({ model: awkwardModel(), zero_optimization: { stage: 2 } });
    const err = await launch<RunOut[]>({
      worldSize: 2, entry: CKPT_ENTRY, timeoutS: 30,
      args: { runs: [{ job, ops: [{ op: "train", steps: 1 }, { op: "save", dir, tag: "t1" }] }] },
    }).then(() => null, (e: Error) => e);
    expect(err?.message).toContain(`${dir}: is locked by the run with pid ${other.pid} on host ${hostname()}`);
    expect(existsSync(join(dir, "t1"))).toBe(false);
    expect(existsSync(join(dir, "t1.tmp"))).toBe(false);
  } finally {
    other.kill();
    await other.exited;
  }
}, 300_000);

describe("dataStreamChanges", () => {
  test("names every differing key with both values; none when equal", () => {
    const base = resolveJobConfig({ ...JOB, data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 13 }, seed: 3 }).config;
    expect(dataStreamChanges(JSON.parse(JSON.stringify(base)), base)).toEqual([]);
    const saved = { ...base, seed: 4, data: { ...base.data, seq_len: 17, dataset: "sotu" } };
    expect(dataStreamChanges(saved, base)).toEqual(['data.dataset "moby-dick" (checkpoint: "sotu")', "data.seq_len 13 (checkpoint: 17)", "seed 3 (checkpoint: 4)"]);
    expect(dataStreamChanges({ data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 13 } }, base)).toEqual(["seed 3 (checkpoint: nothing)"]);
    expect(dataStreamChanges(null, base)).toHaveLength(4);
  });
});


/** Run the train CLI to completion. */
function train(args: string[]): { code: number; stdout: string; stderr: string } {
  const r = Bun.spawnSync(["bun", TRAIN, ...args], { env: { ...process.env, CI: "1" } });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

describe("bun run train with checkpoint.dir", () => {
  test("a second run on the same directory exits 2 naming it and the holder's pid; SIGTERM of the first saves, exits 3 and releases the lock", async () => {
    const dir = fresh();
    const jobFile = join(ROOT, "long.json");
    writeFileSync(jobFile, JSON.stringify({ ...JOB, checkpoint: { dir, save_interval: 0, keep_last: 0 } }));
    const first = Bun.spawn(["bun", TRAIN, "--config", jobFile], { stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
    // wait until its ranks are training (rank 0 printed the data line)
    const reader = first.stdout.getReader();
    let seen = "";
    while (!/^data +\S+: \d+ tokens/m.test(seen)) {
      const c = await reader.read();
      if (c.done) break;
      seen += new TextDecoder().decode(c.value);
    }
    expect(seen).toMatch(/^data +\S+: \d+ tokens/m);
    expect(readLockHolder(dir)?.pid).toBe(first.pid);
    const second = train(["--config", jobFile, "--steps", "2"]);
    expect(second.code).toBe(2);
    expect(second.stderr).not.toMatch(/^\s+at /m);
    expect(second.stderr).toContain(`error: checkpoint directory in use: 1 error\n  - checkpoint.dir: ${dir} is in use by the run with pid ${first.pid} on host ${hostname()}`);
    expect(second.stdout).not.toMatch(/^backend/m); // refused before any rank started
    first.kill("SIGTERM");
    const code = await first.exited;
    const stderr = await new Response(first.stderr).text();
    let stdout = seen;
    for (let c = await reader.read(); !c.done; c = await reader.read()) stdout += new TextDecoder().decode(c.value);
    // stopped by a signal after saving: a distinct status and a line, not 0 (a finished run)
    expect(code, stderr.slice(-2000)).toBe(3);
    expect(stdout).toMatch(/^stopped +by SIGTERM after step \d+ of \d+; checkpoint saved in .*--resume .*\(exit 3\)$/m);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    expect(existsSync(join(dir, "latest"))).toBe(true);
  }, 300_000);

  test("resume: warns naming data.seq_len and seed when they differ from the checkpoint's, not when equal; lock released", () => {
    const dir = fresh();
    const jobFile = join(ROOT, "short.json");
    const job = { ...JOB, steps: 2, checkpoint: { dir, save_interval: 0, keep_last: 0 } };
    writeFileSync(jobFile, JSON.stringify(job));
    const a = train(["--config", jobFile]);
    expect(a.code, a.stderr).toBe(0);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    const same = train(["--config", jobFile, "--resume", dir, "--steps", "3"]);
    expect(same.code, same.stderr).toBe(0);
    expect(same.stdout).not.toContain("another data stream");
    const other = join(ROOT, "short-other.json");
    writeFileSync(other, JSON.stringify({ ...job, data: { ...job.data, seq_len: 7 } }));
    const b = train(["--config", other, "--resume", dir, "--steps", "4", "--seed", "9"]);
    expect(b.code, b.stderr).toBe(0);
    expect(b.stdout).toMatch(/^warning: resuming with another data stream than the checkpoint's: data\.seq_len 7 \(checkpoint: 11\), seed 9 \(checkpoint: 5\); /m);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  }, 300_000);
});
