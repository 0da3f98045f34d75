/**
 * `bun run train --launcher mpi` is the parent of mpirun, which is the parent of the ranks. A
 * SIGTERM or SIGINT sent to that launcher process (a supervisor, `timeout`, `kill <pid>`) used to
 * end the launcher alone: mpirun and every rank went on training unseen, orphaned, writing
 * checkpoints and holding the checkpoint lock. SIGKILL of the launcher did the same (the ranks
 * watch their parent, which is mpirun, still alive). Now the launcher passes SIGINT/SIGTERM on to
 * mpirun (which ends its ranks) and exits 128 + the signal once mpirun is gone; and the ranks on the
 * launcher's host watch the launcher's pid, so its SIGKILL ends them (exit 129) and mpirun with them.
 *
 * A SIGTERM to one rank's process other than rank 0's stops every rank after the same step (they
 * agree on it), and the run exits 3 with its `stopped` line like a `local` run (it exited 0, "done",
 * since rank 0's process had received no signal).
 *
 * Every process of a run carries a marker in its environment (a ZEROMOE_* variable, forwarded to the
 * ranks by mpirun's -x), so the test finds them all. Hang guards only: no timing is asserted.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { MPI_AVAILABLE } from "../comm/mpi/mpi-available.ts";
import { marked, MPI_MOE_JOB, mpiRuns, type MpiRun } from "./mpi-run-kit.ts";

const runs = mpiRuns("zeromoe-mpi-signals-");

/** The process of mpi rank `rank` among those marked with `id`, or null. */
function rankProcess(id: string, rank: number): number | null {
  return marked(id, `OMPI_COMM_WORLD_RANK=${rank}`)[0] ?? null;
}

/** Poll `f` every 100 ms until it is true or `ms` have passed; returns its last value. */
function waitFor(f: () => boolean, ms: number): boolean {
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    if (f()) return true;
    Bun.sleepSync(100);
  }
  return f();
}

let checkpoints = 0;

/** Start a long mpi run at world 2 and wait until it has saved a checkpoint (the ranks are training). */
function startRun(): MpiRun {
  const dir = join(runs.root, `ck${checkpoints++}`);
  const { proc, id, log } = runs.start({ ...MPI_MOE_JOB, steps: 1000000, steps_per_print: 1000, checkpoint: { dir, save_interval: 2, keep_last: 2 } });
  const up = waitFor(() => existsSync(join(dir, "latest")) || proc.exitCode !== null, 120_000);
  expect(up && proc.exitCode === null, `the run did not start training (exit ${proc.exitCode})`).toBe(true);
  // the launcher, mpirun and two ranks
  expect(marked(id).length).toBeGreaterThanOrEqual(4);
  return { proc, id, log };
}

describe.skipIf(!MPI_AVAILABLE)("signals to the --launcher mpi process", () => {
  for (const [sig, num] of [["SIGTERM", 15], ["SIGINT", 2]] as const) {
    test(`${sig} to the launcher: mpirun and every rank end, the launcher exits ${128 + num} after them`, async () => {
      const { proc, id, log } = startRun();
      proc.kill(sig);
      const exited = await Promise.race([proc.exited.then(() => true), Bun.sleep(120_000).then(() => false)]);
      expect(exited, "the launcher did not exit").toBe(true);
      expect(proc.exitCode, `signal ${proc.signalCode}: ${readFileSync(log, "utf8").slice(-2000)}`).toBe(128 + num);
      // the launcher waited for mpirun, which ended its ranks: nothing of the run is left (a rank
      // may take a moment to be reaped)
      expect(waitFor(() => marked(id).length === 0, 30_000), `left running: ${marked(id).join(", ")}`).toBe(true);
    }, 300_000);
  }

  test("SIGTERM to one rank's process (rank 1): all ranks stop after the same step with a checkpoint, exit 3 with a stopped line", async () => {
    const { proc, id, log } = startRun();
    const r1 = rankProcess(id, 1);
    expect(r1).not.toBeNull();
    process.kill(r1!, "SIGTERM");
    const exited = await Promise.race([proc.exited.then(() => true), Bun.sleep(120_000).then(() => false)]);
    expect(exited, "the launcher did not exit").toBe(true);
    const text = readFileSync(log, "utf8");
    // rank 0's process never received the signal: it used to report "done" and exit 0, as if the
    // run had finished its 1000000 steps
    expect(proc.exitCode, text.slice(-3000)).toBe(3);
    expect(text).toMatch(/^stopping +SIGTERM received: stopping after step (\d+) with a checkpoint$/m);
    expect(text).toMatch(/^stopped +by SIGTERM after step \d+ of 1000000; checkpoint saved in .* \(exit 3\)$/m);
    expect(waitFor(() => marked(id).length === 0, 30_000), `left running: ${marked(id).join(", ")}`).toBe(true);
  }, 300_000);

  test("SIGKILL of the launcher: the ranks notice (exit 129) and mpirun ends with them", async () => {
    const { proc, id } = startRun();
    proc.kill("SIGKILL");
    await proc.exited;
    expect(waitFor(() => marked(id).length === 0, 60_000), `left running after the launcher's SIGKILL: ${marked(id).join(", ")}`).toBe(true);
  }, 300_000);
});
