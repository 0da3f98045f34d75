/**
 * The `mpi` transport's collectives, one process per rank under mpirun, against the same
 * independent reference as the `local` transport's tests (../fixtures/collectives-entry.ts):
 * world sizes 1–4, sizes 0, 1, primes, every element kind, sum/max/average, uneven
 * all_to_all_v, dp/ep/edp sub-groups, all_reduce == reduce_scatter + all_gather bit for bit, and
 * the ring byte accounting. Skips with a message when Open MPI is absent.
 */

import { expect, test } from "bun:test";
import { launchMpi } from "../../../src/launch/mpi-launch.ts";
import type { CheckResult, CollectivesArgs } from "../fixtures/collectives-entry.ts";
import { KINDS } from "../reference.ts";
import { MPI_AVAILABLE } from "./mpi-available.ts";

const ENTRY = new URL("../fixtures/collectives-entry.ts", import.meta.url);

function expectAllPass(results: CheckResult[][], worldSize: number): void {
  const flat = results.flat();
  const failed = flat.filter((c) => c.bad !== 0);
  expect(failed.map((c) => `${c.name}: ${c.bad}/${c.checked} wrong, ${c.first}`)).toEqual([]);
  expect(results.length).toBe(worldSize);
  expect(new Set(results.map((r) => r.length)).size).toBe(1);
  expect(flat.reduce((p, c) => p + c.checked, 0)).toBeGreaterThan(1000 * worldSize);
}

for (const worldSize of [1, 2, 3, 4]) {
  test.skipIf(!MPI_AVAILABLE)(`mpi world ${worldSize}: all collectives, all kinds, sizes 0/1/primes`, async () => {
    const args: CollectivesArgs = { seed: 1234 + worldSize, sizes: [0, 1, 7, 97, 1031], kinds: [...KINDS], a2aMax: 700 };
    const results = await launchMpi<CheckResult[]>({ worldSize, entry: ENTRY, args, timeoutS: 60, wallTimeoutS: 120 });
    expectAllPass(results, worldSize);
  }, 300_000);
}

test.skipIf(!MPI_AVAILABLE)("mpi world 4, ep_size 2: dp, ep and edp sub-groups", async () => {
  const args: CollectivesArgs = { seed: 99, sizes: [1, 13, 257], kinds: ["f32", "bf16", "i32"], epSize: 2, a2aMax: 300 };
  const results = await launchMpi<CheckResult[]>({ worldSize: 4, entry: ENTRY, args, timeoutS: 60, wallTimeoutS: 120 });
  expectAllPass(results, 4);
  const names = results.flat().map((c) => c.name);
  expect(names.some((n) => n.startsWith("rank 1 ") && n.includes("edp[1,3]"))).toBe(true);
  expect(names.some((n) => n.startsWith("rank 2 ") && n.includes("ep[2,3]"))).toBe(true);
}, 300_000);
