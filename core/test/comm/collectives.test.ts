/**
 * Collectives on real concurrent ranks (Bun Workers) against the independent reference: world
 * sizes 1–4, sizes 0, 1, primes and multi-chunk (a 1 KiB arena slot forces many chunks/rounds),
 * every element kind, sum/max/average, uneven all_to_all_v, dp/ep/edp sub-groups for world 4 with
 * ep_size 2, determinism (all_reduce == reduce_scatter + all_gather bit for bit) and ring byte
 * accounting.
 */

import { expect, test } from "bun:test";
import { launch } from "../../src/launch/launch.ts";
import type { CheckResult, CollectivesArgs } from "./fixtures/collectives-entry.ts";
import { KINDS } from "./reference.ts";

const ENTRY = new URL("./fixtures/collectives-entry.ts", import.meta.url);

function expectAllPass(results: CheckResult[][], worldSize: number): void {
  const flat = results.flat();
  const failed = flat.filter((c) => c.bad !== 0);
  expect(failed.map((c) => `${c.name}: ${c.bad}/${c.checked} wrong, ${c.first}`)).toEqual([]);
  // Every rank ran the same set of checks, and they compared real data.
  expect(results.length).toBe(worldSize);
  const perRank = results.map((r) => r.length);
  expect(new Set(perRank).size).toBe(1);
  expect(flat.reduce((p, c) => p + c.checked, 0)).toBeGreaterThan(1000 * worldSize);
}

for (const worldSize of [1, 2, 3, 4]) {
  test(`world ${worldSize}: all collectives, all kinds, sizes 0/1/primes/multi-chunk`, async () => {
    const args: CollectivesArgs = { seed: 1234 + worldSize, sizes: [0, 1, 7, 97, 1031], kinds: [...KINDS], a2aMax: 700 };
    const results = await launch<CheckResult[]>({ worldSize, entry: ENTRY, args, slotBytes: 1024, timeoutS: 60 });
    expectAllPass(results, worldSize);
  }, 300_000);
}

test("world 4, ep_size 2: dp, ep and edp sub-groups", async () => {
  const args: CollectivesArgs = { seed: 99, sizes: [1, 13, 257], kinds: ["f32", "bf16", "i32"], epSize: 2, a2aMax: 300 };
  const results = await launch<CheckResult[]>({ worldSize: 4, entry: ENTRY, args, slotBytes: 2048, timeoutS: 60 });
  expectAllPass(results, 4);
  const names = results.flat().map((c) => c.name);
  // Groups are the documented layout: ep = consecutive blocks, edp = same index within ep.
  expect(names.some((n) => n.startsWith("rank 1 ") && n.includes("ep[0,1]"))).toBe(true);
  expect(names.some((n) => n.startsWith("rank 1 ") && n.includes("edp[1,3]"))).toBe(true);
  expect(names.some((n) => n.startsWith("rank 2 ") && n.includes("ep[2,3]"))).toBe(true);
  expect(names.some((n) => n.startsWith("rank 2 ") && n.includes("edp[0,2]"))).toBe(true);
}, 300_000);
