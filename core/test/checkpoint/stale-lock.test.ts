/**
 * A lock whose holder is a zombie (exited, not yet reaped — what a trainer killed with `kill -9` is
 * until its parent collects it) is taken over at once (issue 18: a restart was refused as
 * "directory in use" for about 1.5 s after a kill -9).
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { acquireCheckpointLock, LOCK_FILE, lockConflict, pidAlive, processState } from "../../src/checkpoint/dir-lock.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-zombie-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

test("a zombie holder counts as gone: lockConflict is null and the lock is taken over at once", async () => {
  // `exec sleep` replaces the shell by a process that never reaps the child it inherited; the
  // child outlives the exec (it sleeps first), so bash cannot reap it before
  const parent = Bun.spawn(["bash", "-c", `sh -c "sleep 1; exit 0" & echo $!; exec sleep 120`], { stdout: "pipe" });
  try {
    const reader = parent.stdout.getReader();
    let out = "";
    while (!out.includes("\n")) {
      const c = await reader.read();
      if (c.done) break;
      out += new TextDecoder().decode(c.value);
    }
    const zombie = Number(out.trim());
    expect(zombie).toBeGreaterThan(1);
    for (let st = processState(zombie); st !== "Z"; st = processState(zombie)) {
      if (st === null) throw new Error(`pid ${zombie} was reaped before it became a zombie (setup failed)`);
      await Bun.sleep(10); // hang guard: the test timeout
    }
    expect(pidAlive(zombie)).toBe(false);
    expect(pidAlive(process.pid)).toBe(true);
    expect(pidAlive(parent.pid)).toBe(true); // sleeping, not a zombie

    const dir = join(ROOT, "ck");
    mkdirSync(dir);
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: zombie, host: hostname(), started: new Date().toISOString() }) + "\n");
    expect(lockConflict(dir)).toBeNull();
    const warnings: string[] = [];
    const lock = acquireCheckpointLock(dir, (m) => warnings.push(m));
    expect(lock.tookOverFrom?.pid).toBe(zombie);
    expect(warnings.join("\n")).toContain(`pid ${zombie}`);
    lock.release();
  } finally {
    parent.kill("SIGKILL");
    await parent.exited;
  }
}, 300_000);

test("processState reads the state after the last ')' (a command name may hold spaces and parentheses)", () => {
  expect(["R", "S"]).toContain(processState(process.pid)!);
  expect(processState(2 ** 22 + 12345)).toBeNull();
});
