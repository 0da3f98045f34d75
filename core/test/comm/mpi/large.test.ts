/**
 * Large arrays on the `mpi` transport: 2 ranks, 2 × 16,777,259 f32 elements (134 MB) per rank, so
 * all_reduce runs in several 64 MiB chunks with a prime-length remainder; checked against the
 * reference sum at sampled indices and at every boundary, reduce_scatter + all_gather bit-identical
 * to all_reduce over the whole array, and a large all_to_all_v (the fixture of large.test.ts).
 * Skips with a message when Open MPI is absent.
 */
import { test } from "bun:test";
import { launchMpi } from "../../../src/launch/mpi-launch.ts";
import type { LargeArgs, LargeResult } from "../fixtures/large-entry.ts";
import { expectLargeCollectivesExact } from "../large-expectations.ts";
import { MPI_AVAILABLE } from "./mpi-available.ts";

test.skipIf(!MPI_AVAILABLE)("134 MB per rank at world 2 on mpi: chunked all_reduce exact, RS+AG bit-identical, large all_to_all_v", async () => {
  const args: LargeArgs = { length: 2 * 16_777_259, seed: 4243 };
  const results = await launchMpi<LargeResult>({ worldSize: 2, entry: new URL("../fixtures/large-entry.ts", import.meta.url), args, timeoutS: 120, wallTimeoutS: 240 });
  expectLargeCollectivesExact(results);
}, 300_000);
