/**
 * Aliasing on both transports: an in-place reduce_scatter (output = this rank's part of the
 * input), all_reduce on a subarray view and all_gather between views of one buffer give the same
 * bits as on fresh copies, at world sizes 2–4, with part sizes that span several arena chunks on
 * `local` (a 1 KiB slot). The mpi cases skip when Open MPI is absent.
 */
import { expect, test } from "bun:test";
import { launch } from "../../src/launch/launch.ts";
import { launchMpi } from "../../src/launch/mpi-launch.ts";
import { MPI_AVAILABLE } from "./mpi/mpi-available.ts";

const ENTRY = new URL("./fixtures/in-place-entry.ts", import.meta.url);

for (const n of [2, 3, 4]) {
  test(`local world ${n}: in-place reduce_scatter and views equal fresh copies`, async () => {
    const res = await launch<Record<string, number>>({ worldSize: n, entry: ENTRY, args: { s: 1031, seed: 17 + n }, slotBytes: 1024, timeoutS: 60 });
    for (const r of res) expect(r).toEqual({ reduceScatterInPlace: 0, allReduceView: 0, allGatherViews: 0 });
  }, 300_000);
}

test.skipIf(!MPI_AVAILABLE)("mpi world 3: in-place reduce_scatter and views equal fresh copies", async () => {
  const res = await launchMpi<Record<string, number>>({ worldSize: 3, entry: ENTRY, args: { s: 1031, seed: 5 }, timeoutS: 60, wallTimeoutS: 120 });
  for (const r of res) expect(r).toEqual({ reduceScatterInPlace: 0, allReduceView: 0, allGatherViews: 0 });
}, 300_000);
