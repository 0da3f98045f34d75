/**
 * Failure handling of the `mpi` transport under mpirun: a rank that throws ends the job with its
 * message (MPI_Abort from the failing rank); a rank killed with SIGKILL ends the job through
 * mpirun's report naming the rank (not a timeout; no wall-clock assertion, the test timeouts are hang guards); a rank that stalls makes the others time out naming the
 * collective, the group and the missing rank; a rank that returns early makes the others fail at
 * their next collective naming it; disagreeing arguments raise CommMismatchError. In every case no rank process outlives the job. Skips when Open MPI is absent.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LaunchError } from "../../../src/launch/launch.ts";
import { launchMpi, type MpiJobOutput } from "../../../src/launch/mpi-launch.ts";
import type { FailureArgs } from "./fixtures/failure-entry.ts";
import { MPI_AVAILABLE } from "./mpi-available.ts";

const ENTRY = new URL("./fixtures/failure-entry.ts", import.meta.url);
const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-mpi-fail-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Run the fixture, expect failure; return the error and the ranks' pids. */
async function failingJob(name: string, worldSize: number, mode: FailureArgs["mode"], victim: number, timeoutS = 60): Promise<{ err: LaunchError & { output: MpiJobOutput }; pids: number[] }> {
  const dir = join(ROOT, name);
  require("node:fs").mkdirSync(dir);
  let err: unknown = null;
  try {
    await launchMpi({ worldSize, entry: ENTRY, args: { dir, mode, victim } satisfies FailureArgs, timeoutS, wallTimeoutS: 120 });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(LaunchError);
  const pids: number[] = [];
  for (let r = 0; r < worldSize; r++) {
    const f = join(dir, `pid-${r}`);
    if (existsSync(f)) pids.push(Number(readFileSync(f, "utf8")));
  }
  expect(pids.length).toBe(worldSize); // every rank started and recorded itself
  return { err: err as LaunchError & { output: MpiJobOutput }, pids };
}

/** No rank process is left once launchMpi has returned (give the kernel a moment to reap). */
async function expectNoOrphans(pids: number[]): Promise<void> {
  for (let i = 0; i < 50 && pids.some(alive); i++) await Bun.sleep(100);
  expect(pids.filter(alive)).toEqual([]);
}

test.skipIf(!MPI_AVAILABLE)("a rank that throws ends the job with its message; no orphans", async () => {
  const { err, pids } = await failingJob("throw", 3, "throw", 1);
  expect(err.rank).toBe(1);
  expect(err.message).toContain("rank 1 failed on purpose");
  await expectNoOrphans(pids);
}, 300_000);

test.skipIf(!MPI_AVAILABLE)("SIGKILL of one rank ends the job naming the rank (not by a timeout); no orphans", async () => {
  const { err, pids } = await failingJob("kill", 4, "kill", 2);
  // ended by mpirun's report of the killed process: not by the 60 s collective timeout, and mpirun
  // exited by itself (the launcher's 120 s wall guard did not have to kill it)
  expect(err.message).not.toMatch(/timed out/);
  expect(err.output.signal).toBeNull();
  expect(err.rank).toBe(2);
  expect(err.message).toMatch(/rank 2/);
  expect(err.output.stderr + err.output.stdout).toMatch(/signal 9|Killed/);
  await expectNoOrphans(pids);
}, 300_000);

test.skipIf(!MPI_AVAILABLE)("a rank that stalls: the others time out naming the op, the group and the missing rank", async () => {
  const { err, pids } = await failingJob("stall", 3, "stall", 0, 3);
  expect(err.message).toMatch(/all_reduce on group world \(rank [12]\): timed out after 3 s waiting for rank\(s\) \[0\]/);
  // the stalled rank (60 s asleep) was ended by the abort: mpirun exited by itself, not by the wall guard
  expect(err.output.signal).toBeNull();
  await expectNoOrphans(pids);
}, 300_000);

test.skipIf(!MPI_AVAILABLE)("a rank that returns early: the others fail at their next collective naming it", async () => {
  const { err, pids } = await failingJob("skip", 3, "skip", 0);
  expect(err.message).toContain("CommMismatchError");
  expect(err.message).toContain("rank 0: returned from its entry function");
  expect(err.message).toMatch(/rank 1: all_reduce Float32Array length 7/);
  await expectNoOrphans(pids);
}, 300_000);

test.skipIf(!MPI_AVAILABLE)("disagreeing lengths raise CommMismatchError with every rank's call", async () => {
  const { err, pids } = await failingJob("mismatch", 2, "mismatch", 1);
  expect(err.message).toContain("CommMismatchError");
  expect(err.message).toMatch(/rank 0: all_reduce Float32Array length 7 .*rank 1: all_reduce Float32Array length 5/);
  await expectNoOrphans(pids);
}, 300_000);
