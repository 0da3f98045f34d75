/**
 * A rank that dies mid-step inside a collective ends the whole job promptly (launch's failure
 * semantics, docs/comm.md): `launch` rejects with a LaunchError naming the failing rank and its
 * error, the peers blocked in the matching collective wake with CommAbortedError, and nothing hangs
 * (the peers are woken by the abort, not by the 60 s collective timeout: no failure is a timeout).
 * No wall-clock assertion: the test timeouts are generous hang guards for a busy 2-core machine.
 */
import { describe, expect, test } from "bun:test";
import { launch, LaunchError } from "../../src/launch/index.ts";
import type { FailArgs } from "./failing-rank.ts";
import { tinyJob } from "./fixtures.ts";

const ENTRY = new URL("./failing-rank.ts", import.meta.url);

async function runFailing(n: number, stage: number, failRank: number, mode: FailArgs["mode"]): Promise<{ err: unknown }> {
  const args: FailArgs = { job: tinyJob({ zero_optimization: { stage } }), steps: 3, failRank, failStep: 1, mode };
  const err = await launch({ worldSize: n, entry: ENTRY, args, timeoutS: 60 }).then(() => null, (e: unknown) => e);
  return { err };
}

/** The job ended through the failure's abort, not by a collective timing out. */
function endedByAbort(e: LaunchError): void {
  for (const f of e.failures) expect(f.message).not.toMatch(/CommTimeoutError|timed out/);
}

describe("a rank failing inside a collective in step 2", () => {
  test("throw (stage 2, world 3, rank 1): LaunchError names rank 1 and its error; peers aborted", async () => {
    const { err } = await runFailing(3, 2, 1, "throw");
    expect(err).toBeInstanceOf(LaunchError);
    const e = err as LaunchError;
    expect(e.rank).toBe(1);
    expect(e.message).toContain("InjectedFailure");
    expect(e.message).toContain("step 1 inside a collective");
    const cause = e.failures.find((f) => f.rank === 1)!;
    expect(cause.aborted).toBe(false);
    for (const f of e.failures.filter((f) => f.rank !== 1)) {
      expect(f.aborted).toBe(true);
      expect(f.message).toContain("CommAbortedError");
    }
    endedByAbort(e);
  }, 300_000);

  test("process.exit (stage 3, world 4, rank 3): LaunchError names rank 3 and the exit; peers not timed out", async () => {
    const { err } = await runFailing(4, 3, 3, "exit");
    expect(err).toBeInstanceOf(LaunchError);
    const e = err as LaunchError;
    expect(e.rank).toBe(3);
    expect(e.failures.find((f) => f.rank === 3)!.message).toContain("exited with code 7");
    expect(e.failures.length).toBe(4);
    endedByAbort(e);
  }, 300_000);
});
