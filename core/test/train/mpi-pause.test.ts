/**
 * A whole `--launcher mpi` job stopped with SIGSTOP for 3× its collective timeout (the launcher,
 * mpirun and every rank, as Ctrl-Z or a paused VM would) continues after SIGCONT and trains on with
 * the same losses as an uninterrupted run (issue 32: it died with a CommTimeoutError and a stack,
 * because the mpi transport's timeout was wall time; the local transport's already counted only
 * waiting time, core/test/comm/pause.test.ts). And, as with the local transport, one stuck rank is
 * still named: one rank stopped alone makes the other's collective time out naming it.
 * Collective timeout 3 s (ZEROMOE_COMM_TIMEOUT_S); the pause 9 s. Hang guards only: no timing is
 * asserted.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { MPI_AVAILABLE } from "../comm/mpi/mpi-available.ts";
import { marked, MPI_MOE_JOB, mpiRuns, signal, type MpiRun } from "./mpi-run-kit.ts";

const runs = mpiRuns("zeromoe-mpi-pause-");

/** Start an mpi run of `steps` steps at world 2, collective timeout 3 s. */
function start(steps: number): MpiRun {
  return runs.start({ ...MPI_MOE_JOB, steps, steps_per_print: 1 }, { ZEROMOE_COMM_TIMEOUT_S: "3" });
}

const losses = (text: string) => [...text.matchAll(/^step +(\d+)\/\d+ \| loss ([\d.]+)/gm)].map((m) => [Number(m[1]), m[2]] as const);
const logOf = (p: string) => (existsSync(p) ? readFileSync(p, "utf8") : "");

async function untilStep(log: string, proc: Bun.Subprocess, step: number): Promise<void> {
  for (let i = 0; i < 2400 && proc.exitCode === null; i++) {
    if (losses(logOf(log)).some(([s]) => s >= step)) return;
    await Bun.sleep(50);
  }
  throw new Error(`the run did not reach step ${step} (exit ${proc.exitCode}): ${logOf(log).slice(-1500)}`);
}

describe.skipIf(!MPI_AVAILABLE)("SIGSTOP of an mpi job", () => {
  const STEPS = 20;
  let reference: (readonly [number, string])[] = [];

  test("reference: the same job uninterrupted", async () => {
    const { proc, log } = start(STEPS);
    const code = await proc.exited;
    expect(code, logOf(log).slice(-2000)).toBe(0);
    reference = losses(logOf(log));
    expect(reference.length).toBe(STEPS);
  }, 300_000);

  test("the whole job stopped for 3× the 3 s timeout continues after SIGCONT with the same losses", async () => {
    const { proc, id, log } = start(STEPS);
    await untilStep(log, proc, 3);
    const all = marked(id);
    expect(all.length, "launcher, mpirun and two ranks").toBeGreaterThanOrEqual(4);
    for (const p of all) signal(p, "SIGSTOP");
    await Bun.sleep(9000);
    for (const p of all) signal(p, "SIGCONT");
    const code = await proc.exited;
    const text = logOf(log);
    expect(code, text.slice(-2000)).toBe(0);
    expect(text).not.toContain("CommTimeoutError");
    expect(losses(text)).toEqual(reference);
  }, 300_000);

  test("one rank stopped for 3× the timeout: the other's collective times out naming it, no stack trace", async () => {
    const { proc, id, log } = start(100_000);
    await untilStep(log, proc, 3);
    const rank1 = marked(id, "OMPI_COMM_WORLD_RANK=1");
    expect(rank1.length).toBe(1);
    signal(rank1[0]!, "SIGSTOP");
    for (let i = 0; i < 1200 && proc.exitCode === null; i++) await Bun.sleep(50);
    signal(rank1[0]!, "SIGCONT");
    for (const p of marked(id)) if (proc.exitCode === null) signal(p, "SIGCONT");
    const exited = await Promise.race([proc.exited.then(() => true), Bun.sleep(120_000).then(() => false)]);
    expect(exited, "the job did not end").toBe(true);
    const text = logOf(log);
    expect(proc.exitCode, text.slice(-2000)).not.toBe(0);
    expect(text).toMatch(/timed out after 3 s waiting for rank\(s\) \[1\]/);
  }, 300_000);
});
