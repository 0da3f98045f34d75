/**
 * Collective timeouts are not fooled by a whole-job pause (issue 18): a job suspended (SIGSTOP, as
 * Ctrl-Z or a paused VM) for longer than its collective timeout used to die on SIGCONT blaming a
 * healthy rank, because the deadline was wall time. Now the timeout counts waiting time without
 * progress, each wait slice credited at most MAX_SLICE_CREDIT_MS (group-sync.ts): the paused job
 * carries on, and one stuck rank is still named. No wall-clock time is asserted.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch, LaunchError } from "../../src/launch/index.ts";
import type { PauseArgs } from "./fixtures/pause-entry.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-pause-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

test("a job suspended with SIGSTOP for 2× its 3 s timeout, while waiting in a collective, continues after SIGCONT", async () => {
  const marker = join(ROOT, "marker");
  const child = Bun.spawn(["bun", join(import.meta.dir, "fixtures/pause-main.ts"), marker], { stdout: "pipe", stderr: "pipe" });
  while (!existsSync(marker) && child.exitCode === null) await Bun.sleep(5); // hang guard: test timeout
  expect(child.exitCode).toBeNull();
  child.kill("SIGSTOP");
  await Bun.sleep(6000); // the pause: two collective timeouts long
  child.kill("SIGCONT");
  const code = await child.exited;
  const out = await new Response(child.stdout).text();
  const err = await new Response(child.stderr).text();
  expect(out + err).toMatch(/^ok \d+$/m);
  expect(code).toBe(0);
}, 300_000);

test("one stuck rank is still named by the timeout", async () => {
  const args: PauseArgs = { rounds: 3, sleepMs: 1, stuckRank: 2, stuckMs: 20_000 };
  let err: unknown = null;
  try {
    await launch({ worldSize: 3, entry: join(import.meta.dir, "fixtures/pause-entry.ts"), timeoutS: 1, args, graceMs: 500 });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(LaunchError);
  const msg = (err as LaunchError).failures.map((f) => f.message).join("\n");
  expect(msg).toMatch(/CommTimeoutError: all_reduce on group world \(rank [01]\): timed out after 1 s waiting for rank\(s\) \[2\]/);
}, 300_000);
