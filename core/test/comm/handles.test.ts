/**
 * The Work-handle contract on the launched `local` transport (ranks are threads, each with its
 * progress thread), world sizes 1–4 with awkward sizes: issue order with reverse waits, promised
 * inputs, a collective completing while the issuing thread is blocked (concurrency, shown by the
 * order of events, never a time), and a failed handle's error (fixtures/handles-entry.ts).
 */

import { expect, test } from "bun:test";
import { launch } from "../../src/launch/launch.ts";
import type { HandlesArgs, HandlesResult } from "./fixtures/handles-entry.ts";

const ENTRY = new URL("./fixtures/handles-entry.ts", import.meta.url);

for (const worldSize of [1, 2, 3, 4]) {
  test(`world ${worldSize}: handles complete in any wait order, promised inputs keep their place, collectives run while the rank's thread is blocked, errors reject the handle`, async () => {
    const args: HandlesArgs = { seed: 31 + worldSize, sizes: [1, 7, 97, 1031], flag: new SharedArrayBuffer(8) };
    const results = await launch<HandlesResult>({ worldSize, entry: ENTRY, args, slotBytes: 1024, timeoutS: 60 });
    expect(results.flatMap((r) => r.bad)).toEqual([]);
    for (const r of results) {
      expect(r.checked).toBeGreaterThan(1000);
      // the progress thread completes it, so a fresh handle is never complete on return
      expect(r.pendingAtIssue).toBe(true);
    }
    if (worldSize >= 2) {
      expect(results[0]!.concurrent).toBe(true);
      for (const r of results) {
        expect(r.mismatch?.name).toBe("CommMismatchError");
        expect(r.mismatch?.isClass).toBe(true);
        expect(r.mismatch?.message).toContain("all_reduce");
      }
    }
  }, 300_000);
}
