/**
 * Benchmarks that can rewrite the tracked docs/performance.md (zero, comm, moe) write it only with
 * an explicit `--write`; a plain run, or the old `--no-write`, leaves it alone. Unknown arguments
 * still fail before any work.
 */
import { describe, expect, test } from "bun:test";
import { parseCommBenchArgs } from "../../bench/comm.ts";
import { parseMoeBenchArgs } from "../../bench/moe.ts";
import { parseZeroBenchArgs } from "../../bench/zero.ts";

describe("bench: docs/performance.md is written only with --write", () => {
  test("zero", () => {
    expect(parseZeroBenchArgs([]).write).toBe(false);
    expect(parseZeroBenchArgs(["--steps", "3"]).write).toBe(false);
    expect(parseZeroBenchArgs(["--no-write"]).write).toBe(false);
    const p = parseZeroBenchArgs(["--world-size", "3", "--write", "--steps", "7"]);
    expect(p.write).toBe(true);
    expect(p.options.worldSize).toBe(3);
    expect(p.options.steps).toBe(7);
    expect(() => parseZeroBenchArgs(["--wrte"])).toThrow(/bench zero: unknown argument --wrte/);
  });
  test("comm", () => {
    expect(parseCommBenchArgs([]).write).toBe(false);
    expect(parseCommBenchArgs(["--no-write"]).write).toBe(false);
    const p = parseCommBenchArgs(["--write", "--sizes-mb", "1,3", "--iters", "5"]);
    expect(p).toEqual({ worldSize: 4, worldSizes: [4], transports: ["local"], sizesMB: [1, 3], iters: 5, write: true });
    const m = parseCommBenchArgs(["--transport", "local,mpi", "--world-size", "2,4"]);
    expect([m.transports, m.worldSizes, m.worldSize]).toEqual([["local", "mpi"], [2, 4], 2]);
    expect(() => parseCommBenchArgs(["--transport", "nccl"])).toThrow(/--transport takes local, mpi or local,mpi/);
    expect(() => parseCommBenchArgs(["--bogus"])).toThrow(/bench comm: unknown argument --bogus/);
  });
  test("moe", () => {
    expect(parseMoeBenchArgs([]).write).toBe(false);
    expect(parseMoeBenchArgs(["--no-write"]).write).toBe(false);
    expect(parseMoeBenchArgs(["--steps", "2", "--write"])).toEqual({ steps: 2, skew: 1.5, repeat: 3, write: true });
    expect(() => parseMoeBenchArgs(["--x"])).toThrow(/bench moe: unknown argument --x/);
  });
});
