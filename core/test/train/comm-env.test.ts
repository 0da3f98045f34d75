/**
 * The transport's environment variables are user input: `ZEROMOE_COMM_TIMEOUT_S` and
 * `ZEROMOE_COMM_ARENA_MB` that are not positive numbers, or an arena larger than this host's
 * memory, used to end `bun run train` with a stack trace (exit 1: "Error: ZEROMOE_COMM_TIMEOUT_S
 * must be a positive number…" thrown from the launcher, or "RangeError: Out of memory" allocating a
 * 100000 MiB arena per rank). Now they are checked before anything starts: one line naming the
 * variable, its value and what is expected, exit 2.
 */
import { describe, expect, test } from "bun:test";
import { totalmem } from "node:os";
import { resolve } from "node:path";
import { commEnvProblem } from "../../src/cli/comm-env.ts";

const TRAIN = resolve(import.meta.dir, "../../src/cli/train.ts");

describe("commEnvProblem", () => {
  test("unset or empty variables are fine; valid values are fine", () => {
    expect(commEnvProblem({}, 4)).toBeNull();
    expect(commEnvProblem({ ZEROMOE_COMM_TIMEOUT_S: "", ZEROMOE_COMM_ARENA_MB: "" }, 4)).toBeNull();
    expect(commEnvProblem({ ZEROMOE_COMM_TIMEOUT_S: "2.5", ZEROMOE_COMM_ARENA_MB: "3" }, 3)).toBeNull();
  });

  test("a timeout that is not a positive number names the variable and the value", () => {
    for (const v of ["abc", "0", "-5", "NaN", "Infinity", "1e400"]) {
      expect(commEnvProblem({ ZEROMOE_COMM_TIMEOUT_S: v }, 2)).toBe(`ZEROMOE_COMM_TIMEOUT_S must be a positive number of seconds, got "${v}"`);
    }
  });

  test("an arena size that is not a positive number names the variable and the value", () => {
    for (const v of ["abc", "0", "-1", "1MiB"]) {
      expect(commEnvProblem({ ZEROMOE_COMM_ARENA_MB: v }, 2)).toBe(`ZEROMOE_COMM_ARENA_MB must be a positive number of MiB, got "${v}"`);
    }
  });

  test("an arena larger than the host's memory over all ranks is refused, naming the total and the memory", () => {
    const perRankMiB = Math.ceil(totalmem() / 1048576 / 3) + 7;
    const p = commEnvProblem({ ZEROMOE_COMM_ARENA_MB: String(perRankMiB) }, 3);
    expect(p).toStartWith(`ZEROMOE_COMM_ARENA_MB=${perRankMiB}: 3 ranks × ${perRankMiB} MiB of shared arena exceeds this host's memory (`);
    // the same size over one rank fits
    expect(commEnvProblem({ ZEROMOE_COMM_ARENA_MB: String(perRankMiB) }, 1)).toBeNull();
  });
});

describe("bun run train with a bad transport variable", () => {
  for (const [name, value] of [["ZEROMOE_COMM_TIMEOUT_S", "abc"], ["ZEROMOE_COMM_ARENA_MB", "0"], ["ZEROMOE_COMM_ARENA_MB", "100000000"]] as const) {
    test(`${name}=${value}: one line naming it, exit 2, no stack`, () => {
      const r = Bun.spawnSync(["bun", TRAIN, "--backend", "cpu", "--steps", "1", "--world-size", "2"], { env: { ...process.env, CI: "1", [name]: value } });
      const err = r.stderr.toString();
      expect(r.exitCode, err).toBe(2);
      expect(err.trim().split("\n").length, err).toBe(1);
      expect(err).toStartWith(`error: ${name}`);
      expect(err).toContain(value);
    }, 300_000);
  }
});
