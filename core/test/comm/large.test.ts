/**
 * Hundreds of MB through the fixed 16 MiB arena slots: 4 ranks, 4 × 16,777,259 f32 elements
 * (268 MB) per rank; 16,777,259 is prime, so nothing lines up with the 4 Mi-element chunks.
 */

import { test } from "bun:test";
import { launch } from "../../src/launch/launch.ts";
import type { LargeArgs, LargeResult } from "./fixtures/large-entry.ts";
import { expectLargeCollectivesExact } from "./large-expectations.ts";

test("268 MB per rank at world 4: all_reduce exact at boundaries and samples, RS+AG bit-identical, large all_to_all_v", async () => {
  const args: LargeArgs = { length: 4 * 16_777_259, seed: 4242 };
  const results = await launch<LargeResult>({ worldSize: 4, entry: new URL("./fixtures/large-entry.ts", import.meta.url), args, timeoutS: 120 });
  expectLargeCollectivesExact(results);
}, 300_000);
