/**
 * `bun run bench <name> --help` prints the benchmark's usage (its exported USAGE, else its file's
 * head comment) and exits 0; `bench train --help` reached node:util's parseArgs ("Unknown option
 * '--help'") and exited 1.
 */
import { describe, expect, test } from "bun:test";
import { benchHelp } from "../../src/cli/bench.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;

describe("bench --help", () => {
  test("bench train --help exits 0 with its usage; another bench prints its head comment", () => {
    const p = Bun.spawnSync(["bun", "core/src/cli/bench.ts", "train", "--help"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(0);
    expect(p.stdout.toString()).toStartWith("usage: bun run bench train");
  });
  test("benchHelp of every bench is non-empty; an unknown one is named", async () => {
    expect(await benchHelp("zero")).toContain("bun run bench zero (core/bench/zero.ts):");
    await expect(benchHelp("nope")).rejects.toThrow('unknown benchmark "nope"');
  });
});
