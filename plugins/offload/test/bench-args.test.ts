/**
 * `bun run bench offload`'s arguments (parseOffloadBenchArgs in bench/offload.ts): bad values are
 * refused naming the option (the bench exits 2) instead of printing Infinity/NaN tables that
 * `--write` would have put in docs/performance.md.
 */
import { expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseOffloadBenchArgs } from "../bench/offload.ts";
import { scriptArgv, spawn } from "@zeromoe/kernels/runtime";

test("defaults and good values", () => {
  expect(parseOffloadBenchArgs([])).toEqual({ elements: 4_000_000, reps: 3, steps: 6, dir: tmpdir(), write: false });
  const d = mkdtempSync(join(tmpdir(), "bench-args-"));
  try {
    expect(parseOffloadBenchArgs(["--elements", "1009", "--reps", "1", "--steps", "2", "--dir", d, "--write"])).toEqual({ elements: 1009, reps: 1, steps: 2, dir: d, write: true });
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test("bad values name the option", () => {
  const d = mkdtempSync(join(tmpdir(), "bench-args-"));
  const file = join(d, "a-file");
  writeFileSync(file, "x");
  try {
    const cases: [string[], RegExp][] = [
      [["--elements", "abc"], /--elements expects an integer ≥ 1, got "abc"/],
      [["--elements", "0"], /--elements expects an integer ≥ 1/],
      [["--elements", "2.5"], /--elements expects an integer/],
      [["--reps", "0"], /--reps expects an integer ≥ 1, got "0"/],
      [["--steps", "1"], /--steps expects an integer ≥ 2, got "1"/],
      [["--steps"], /--steps expects an integer ≥ 2, got nothing/],
      [["--dir", file], /--dir .* is not an existing directory/],
      [["--dir"], /--dir expects a directory/],
      [["--element", "5"], /unknown argument "--element"/],
    ];
    for (const [args, re] of cases) {
      const r = parseOffloadBenchArgs(args);
      expect(typeof r).toBe("string");
      expect(r as string).toMatch(re);
    }
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test("the bench exits 2 with the message, no stack", async () => {
  const p = spawn([...scriptArgv(resolve(import.meta.dirname, "../../../core/src/cli/bench.ts")), "offload", "--reps", "0"], { stdout: "pipe", stderr: "pipe" });
  const [o, e] = await Promise.all([new Response(p.stdout!).text(), new Response(p.stderr!).text()]);
  expect(await p.exited).toBe(2);
  expect(o + e).toContain("--reps expects an integer ≥ 1");
  expect(o + e).not.toMatch(/\n\s+at /);
}, 300_000);
