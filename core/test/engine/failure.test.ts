/**
 * A rank that dies mid-step inside a collective ends the whole job promptly (launch's failure
 * semantics, docs/comm.md): `launch` rejects with a LaunchError naming the failing rank and its
 * error, the peers blocked in the matching collective wake with CommAbortedError, and nothing hangs
 * (well under the 30 s the issue allows; the default collective timeout is 300 s).
 */
import { describe, expect, test } from "bun:test";
import { launch, LaunchError } from "../../src/launch/index.ts";
import type { FailArgs } from "./failing-rank.ts";
import { tinyJob } from "./fixtures.ts";

const ENTRY = new URL("./failing-rank.ts", import.meta.url);

async function runFailing(n: number, stage: number, failRank: number, mode: FailArgs["mode"]): Promise<{ err: unknown; seconds: number }> {
  const args: FailArgs = { job: tinyJob({ zero_optimization: { stage } }), steps: 3, failRank, failStep: 1, mode };
  const t0 = performance.now();
  const err = await launch({ worldSize: n, entry: ENTRY, args, timeoutS: 60 }).then(() => null, (e: unknown) => e);
  return { err, seconds: (performance.now() - t0) / 1000 };
}

describe("a rank failing inside a collective in step 2", () => {
  test("throw (stage 2, world 3, rank 1): LaunchError names rank 1 and its error; peers aborted; < 30 s", async () => {
    const { err, seconds } = await runFailing(3, 2, 1, "throw");
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
    expect(seconds).toBeLessThan(30);
  }, 40_000);

  test("process.exit (stage 3, world 4, rank 3): LaunchError names rank 3 and the exit; < 30 s", async () => {
    const { err, seconds } = await runFailing(4, 3, 3, "exit");
    expect(err).toBeInstanceOf(LaunchError);
    const e = err as LaunchError;
    expect(e.rank).toBe(3);
    expect(e.failures.find((f) => f.rank === 3)!.message).toContain("exited with code 7");
    expect(e.failures.length).toBe(4);
    expect(seconds).toBeLessThan(30);
  }, 40_000);
});
