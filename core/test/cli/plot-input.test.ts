/**
 * `bun run plot <summary.json>` on a path that is not a regular file (task P, 2026-12-02): a FIFO
 * blocked forever (readFileSync waits for a writer), a directory printed "not JSON: EISDIR". Both
 * are now exit 2 naming what the path is. The plot command runs as a child process with a 2-minute
 * limit (it takes well under a second), so a regression fails instead of hanging the suite.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-plot-input-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const PLOT = resolve(import.meta.dir, "../../src/cli/plot.ts");

function plot(path: string): { code: number | null; stderr: string } {
  const r = Bun.spawnSync(["bun", PLOT, path, "--out", join(ROOT, "out")], { timeout: 120_000, killSignal: "SIGKILL" });
  return { code: r.exitCode, stderr: r.stderr.toString() };
}

test("a directory or a FIFO as the summary: exit 2 saying what it is", () => {
  const dir = join(ROOT, "dir.json");
  mkdirSync(dir);
  let r = plot(dir);
  expect(r.code, r.stderr).toBe(2);
  expect(r.stderr).toContain(`${dir}: not a regular file (a directory)`);
  const fifo = join(ROOT, "fifo.json");
  expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
  r = plot(fifo);
  expect(r.code, r.stderr).toBe(2);
  expect(r.stderr).toContain(`${fifo}: not a regular file (a FIFO)`);
}, 300_000);
