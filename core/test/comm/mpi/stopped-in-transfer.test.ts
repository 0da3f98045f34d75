/**
 * A member stopped after its call header arrived (SIGSTOP of one rank in the middle of a transfer)
 * must be named by the others' timeout, as a member that never arrives is (issue 32: "the local and
 * mpi transports behave alike under SIGSTOP of one rank"). Before: phase 2 of every collective ran
 * Open MPI's blocking calls (MPI_Bcast, MPI_Alltoallv, …), which have no timeout, so rank 0 waited
 * for as long as rank 1 was stopped — forever here (core/test/train/mpi-pause.test.ts's one-rank
 * case hung when its SIGSTOP landed in a transfer). Now the transfers are non-blocking collectives
 * polled under the same pause-proof timeout. The stop is simulated deterministically on rank 1
 * (fixtures/stopped-in-transfer.ts: its data-movement functions sleep 30 s, then move nothing).
 * Timeout 3 s; the 120 s child limit is a hang guard, no time is asserted.
 */
import { expect, test } from "bun:test";
import { mpirunCommand } from "../../../src/launch/mpi-launch.ts";
import { MPI_AVAILABLE } from "./mpi-available.ts";

const FIXTURE = new URL("./fixtures/stopped-in-transfer.ts", import.meta.url).pathname;

for (const mode of ["broadcast", "all_reduce"] as const) {
  test.skipIf(!MPI_AVAILABLE)(`${mode}: rank 1 stopped inside the transfer is named by rank 0's timeout`, () => {
    const r = Bun.spawnSync([...mpirunCommand({ worldSize: 2 }), process.execPath, FIXTURE, mode], { timeout: 120_000, killSignal: "SIGKILL", env: { ...process.env, CI: "1" } });
    const out = r.stdout.toString() + r.stderr.toString();
    expect(r.exitCode, out).toBe(3); // rank 0's MPI_Abort, not the hang guard's kill
    expect(out).toMatch(new RegExp(`rank 0: CommTimeoutError: ${mode} on group world \\(rank 0\\): timed out after 3 s waiting for rank\\(s\\) \\[1\\] to finish MPI_I`));
  }, 300_000);
}
