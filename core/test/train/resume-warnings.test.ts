/**
 * A resume that changes what the checkpoint's run would have done says so (resume-config.ts):
 * `--resume --steps 6` on a 4-step job re-plans the lr schedule over 6 steps (before: the lr jumped
 * without a word), and a resumed job without checkpoint.dir saves nothing (before: silently).
 * The same job's schedule compares equal (the unit test).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_JOB, resolveJobConfig } from "../../src/config/index.ts";
import { scheduleChanges } from "../../src/train/resume-config.ts";

const tmp = mkdtempSync(join(tmpdir(), "resume-warnings-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const ROOT = new URL("../../../", import.meta.url).pathname;

function train(args: string[]) {
  const p = Bun.spawnSync(["bun", "core/src/cli/train.ts", ...args, "--backend", "cpu"], { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
  return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
}

describe("resume warnings", () => {
  test("scheduleChanges names the re-planned schedule values, and nothing for the same job", () => {
    const a = resolveJobConfig({ ...DEFAULT_JOB, steps: 100 }).config;
    const b = resolveJobConfig({ ...DEFAULT_JOB, steps: 150 }).config;
    expect(scheduleChanges(JSON.parse(JSON.stringify(a)), a)).toEqual([]);
    expect(scheduleChanges(JSON.parse(JSON.stringify(a)), b)).toEqual(["steps 150 (checkpoint: 100)", "scheduler.params.total_num_steps 150 (checkpoint: 100)"]);
    const c = resolveJobConfig({ ...DEFAULT_JOB, steps: 100, optimizer: { type: "AdamW", params: { lr: 1e-3 } } }).config;
    expect(scheduleChanges(JSON.parse(JSON.stringify(a)), c)).toContain("optimizer.params.lr 0.001 (checkpoint: 0.003)");
    // steps alone (a constant lr) re-plans nothing
    const k = { ...DEFAULT_JOB, scheduler: null };
    expect(scheduleChanges(JSON.parse(JSON.stringify(resolveJobConfig({ ...k, steps: 4 }).config)), resolveJobConfig({ ...k, steps: 8 }).config)).toEqual([]);
  });

  test("bun run train --resume: --steps re-planning the schedule, and no checkpoint.dir, each warn", () => {
    const ck = join(tmp, "ck");
    const job = join(tmp, "job.json");
    const base = { ...DEFAULT_JOB, steps: 4, eval_interval: 0, model: { ...(DEFAULT_JOB.model as object), num_hidden_layers: 1 } };
    writeFileSync(job, JSON.stringify({ ...base, checkpoint: { dir: ck, save_interval: 0, keep_last: 1 } }));
    const first = train(["--config", job]);
    expect(first.code, first.out.slice(-1500)).toBe(0);
    const longer = train(["--config", job, "--resume", ck, "--steps", "6"]);
    expect(longer.code).toBe(0);
    expect(longer.out).toContain("warning: resuming with another learning-rate schedule than the checkpoint's: steps 6 (checkpoint: 4), scheduler.params.total_num_steps 6 (checkpoint: 4)");
    const nodir = join(tmp, "nodir.json");
    writeFileSync(nodir, JSON.stringify({ ...base, steps: 7 })); // the latest checkpoint is step 6 now
    const r = train(["--config", nodir, "--resume", ck]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("warning: checkpoint.dir is null: this resumed run saves no checkpoint");
  }, 300_000);
});
