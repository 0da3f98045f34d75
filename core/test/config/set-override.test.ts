/**
 * `--set KEY=VALUE` (config/set-override.ts) overrides any job key from the command line, and the
 * ep_size/world_size error names it: a checkpoint made with ep_size 2 resumes at world size 1 with
 * `--set moe.ep_size=1` (checkpoints reshard across ep_size) instead of a new job file.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseTrainArgs } from "../../src/cli/args.ts";
import { ConfigError, DEFAULT_JOB, resolveJobConfig } from "../../src/config/index.ts";
import { applySetOverrides, parseSetOverride, type SetOverride } from "../../src/config/set-override.ts";

const tmp = mkdtempSync(join(tmpdir(), "set-override-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const ROOT = new URL("../../../", import.meta.url).pathname;

const sets = (...a: string[]) => a.map((x) => parseSetOverride(x) as SetOverride);

describe("--set KEY=VALUE", () => {
  test("values are JSON or text; paths are checked; the job is not modified", () => {
    expect(sets("moe.ep_size=1", "data.dataset=sotu", "optimizer.params.betas=[0.9, 0.99]", "checkpoint.dir=null").map((s) => s.value)).toEqual([1, "sotu", [0.9, 0.99], null]);
    expect(parseSetOverride("moe.ep_size")).toContain("expected KEY=VALUE");
    expect(parseSetOverride("__proto__.x=1")).toContain("is not a dotted path of key names");
    expect(parseSetOverride("a..b=1")).toContain("is not a dotted path");
    const job = { moe: { ep_size: 2 } };
    const out = applySetOverrides(job, sets("moe.ep_size=1", "data.seq_len=32"));
    expect(out).toEqual({ moe: { ep_size: 1 }, data: { seq_len: 32 } });
    expect(job.moe.ep_size).toBe(2);
    expect(parseTrainArgs(["--set", "moe.ep_size=1", "--set", "steps=3"]).sets!.map((s) => s.text)).toEqual(["moe.ep_size=1", "steps=3"]);
    expect(() => parseTrainArgs(["--set", "nokey"])).toThrow("--set: expected KEY=VALUE");
  });

  test("the ep_size error at a smaller world names --set; a wrong --set key is a job error naming the path", () => {
    const job = { ...DEFAULT_JOB, world_size: 1, moe: { ep_size: 2 } };
    try {
      resolveJobConfig(job);
      throw new Error("unreachable");
    } catch (e) {
      expect((e as ConfigError).issues.find((i) => i.path === "moe.ep_size")?.message).toBe("world_size 1 is not divisible by ep_size 2 (to run at world_size 1, e.g. to resume an ep_size-2 checkpoint, which reshards: --set moe.ep_size=1)");
    }
    expect(resolveJobConfig(job, { sets: sets("moe.ep_size=1") }).config.moe!.ep_size).toBe(1);
    try {
      resolveJobConfig(job, { sets: sets("moe.ep_sise=1") });
      throw new Error("unreachable");
    } catch (e) {
      expect((e as ConfigError).issues.some((i) => i.path === "moe.ep_sise" && /did you mean/.test(i.message))).toBe(true);
    }
  });

  test("an ep_size-2 checkpoint resumes at world size 1 with --set moe.ep_size=1", () => {
    const ck = join(tmp, "ck");
    const job = join(tmp, "job.json");
    writeFileSync(job, JSON.stringify({ ...DEFAULT_JOB, steps: 2, eval_interval: 0, world_size: 2, moe: { ep_size: 2 }, checkpoint: { dir: ck, save_interval: 0, keep_last: 1 } }));
    const run = (args: string[]) => {
      const p = Bun.spawnSync(["bun", "core/src/cli/train.ts", "--config", job, "--backend", "cpu", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
      return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
    };
    expect(run([]).code).toBe(0);
    const bad = run(["--resume", ck, "--world-size", "1", "--steps", "3"]);
    expect(bad.code).toBe(2);
    expect(bad.out).toContain("--set moe.ep_size=1");
    const ok = run(["--resume", ck, "--world-size", "1", "--steps", "3", "--set", "moe.ep_size=1"]);
    expect(ok.code, ok.out.slice(-1500)).toBe(0);
    expect(ok.out).toContain("resharded from world size 2 (ep_size 2)");
  }, 300_000);
});
