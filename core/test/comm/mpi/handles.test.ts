/**
 * The Work-handle contract on the `mpi` transport (MPI driven from each rank's progress thread):
 * issue order with reverse waits, promised inputs and a failed handle's error, as for `local`
 * (../fixtures/handles-entry.ts; the blocked-thread concurrency check needs shared memory between
 * ranks and runs on `local` only). Skips with a message when Open MPI is absent.
 */

import { expect, test } from "bun:test";
import { launchMpi } from "../../../src/launch/mpi-launch.ts";
import type { HandlesArgs, HandlesResult } from "../fixtures/handles-entry.ts";
import { MPI_AVAILABLE } from "./mpi-available.ts";

const ENTRY = new URL("../fixtures/handles-entry.ts", import.meta.url);

for (const worldSize of [1, 3]) {
  test.skipIf(!MPI_AVAILABLE)(`mpi world ${worldSize}: handles in any wait order, promised inputs, a failed handle`, async () => {
    const args: HandlesArgs = { seed: 57 + worldSize, sizes: [1, 7, 97, 1031] };
    const results = await launchMpi<HandlesResult>({ worldSize, entry: ENTRY, args, timeoutS: 60, wallTimeoutS: 120 });
    expect(results.flatMap((r) => r.bad)).toEqual([]);
    for (const r of results) {
      expect(r.checked).toBeGreaterThan(1000);
      expect(r.pendingAtIssue).toBe(true);
      if (worldSize >= 2) expect([r.mismatch?.name, r.mismatch?.isClass]).toEqual(["CommMismatchError", true]);
    }
  }, 300_000);
}
