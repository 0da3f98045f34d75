/**
 * What every rank of the large-array collective runs (fixtures/large-entry.ts) must report, on the
 * local transport (large.test.ts) and on mpi (mpi/large.test.ts): enough indices checked against
 * the reference sum with none wrong, reduce_scatter + all_gather bit-identical to all_reduce, and a
 * large all_to_all_v delivered exactly.
 */
import { expect } from "bun:test";
import type { LargeResult } from "./fixtures/large-entry.ts";

/** Expects each rank's {@link LargeResult} to show every check run and passed. */
export function expectLargeCollectivesExact(results: readonly LargeResult[]): void {
  for (const r of results) {
    expect(r.checkedIndices).toBeGreaterThan(20000);
    expect(r.wrongIndices, r.firstWrong).toBe(0);
    expect(r.bitDifferences).toBe(0);
    expect(r.a2aChecked).toBeGreaterThan(10_000_000);
    expect(r.a2aWrong).toBe(0);
  }
}
