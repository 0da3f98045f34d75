/**
 * One rule for relative paths in a job file (config/job-paths.ts): data.dataset, data.tokenizer and
 * checkpoint.dir are read from the job file's folder, as from_pretrained and plugins were; before,
 * they were read from the working directory, which `bun run` resets to the repository root. And
 * the `zeromoe` command (core/src/cli/zeromoe.ts, scripts/install-command.sh) runs the tools from
 * any folder.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_JOB, loadJobConfig } from "../../src/config/index.ts";

const tmp = mkdtempSync(join(tmpdir(), "zeromoe-command-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const ROOT = new URL("../../../", import.meta.url).pathname;
const TEXT = "Call me Ishmael. Some years ago, never mind how long precisely, I thought I would sail about a little. ".repeat(40);

describe("relative paths in a job file", () => {
  test("data.dataset, data.tokenizer and checkpoint.dir read from the job's folder; a path found only from the working directory warns", async () => {
    const jobDir = join(tmp, "jobs");
    mkdirSync(jobDir, { recursive: true });
    writeFileSync(join(jobDir, "corpus.txt"), TEXT);
    const job = join(jobDir, "job.json");
    writeFileSync(job, JSON.stringify({ ...DEFAULT_JOB, data: { dataset: "corpus.txt", tokenizer: "byte", seq_len: 16 }, checkpoint: { dir: "ck", save_interval: 0, keep_last: 1 } }));
    const r = await loadJobConfig({ configPath: job });
    expect(r.config.data.dataset).toBe(join(jobDir, "corpus.txt"));
    expect(r.config.checkpoint.dir).toBe(join(jobDir, "ck"));
    expect(r.config.data.tokenizer).toBe("byte");
    // the old reading (from the working directory) still finds a file, and says how to write it
    const old = join(tmp, "old.json");
    const cwdFile = "package.json"; // exists from the repository root, not beside the job
    writeFileSync(old, JSON.stringify({ ...DEFAULT_JOB, data: { dataset: "moby-dick", tokenizer: cwdFile } }));
    const prev = process.cwd();
    process.chdir(ROOT);
    try {
      const w = await loadJobConfig({ configPath: old }).then((x) => x.warnings, (e: Error) => [e.message]);
      expect(w.some((m) => m.startsWith(`data.tokenizer: "package.json" is not in the job file's folder`))).toBe(true);
    } finally {
      process.chdir(prev);
    }
  });

  test("zeromoe train from another folder: the job's relative dataset and checkpoint.dir are its folder's", () => {
    const jobDir = join(tmp, "run");
    mkdirSync(jobDir, { recursive: true });
    writeFileSync(join(jobDir, "corpus.txt"), TEXT);
    writeFileSync(join(jobDir, "job.json"), JSON.stringify({ ...DEFAULT_JOB, steps: 1, eval_interval: 0, model: { ...(DEFAULT_JOB.model as object), num_hidden_layers: 1 }, data: { dataset: "corpus.txt", tokenizer: "byte", seq_len: 16, validation_fraction: 0 }, checkpoint: { dir: "ck", save_interval: 0, keep_last: 1 } }));
    const elsewhere = join(tmp, "elsewhere");
    mkdirSync(elsewhere);
    const p = Bun.spawnSync(["bun", join(ROOT, "core/src/cli/zeromoe.ts"), "train", "--config", join(jobDir, "job.json"), "--backend", "cpu"], { cwd: elsewhere, stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
    const out = p.stdout.toString() + p.stderr.toString();
    expect(p.exitCode, out.slice(-1500)).toBe(0);
    expect(out).toContain(`data       ${join(jobDir, "corpus.txt")}`);
    expect(existsSync(join(jobDir, "ck", "latest"))).toBe(true);
    const bad = Bun.spawnSync(["bun", join(ROOT, "core/src/cli/zeromoe.ts"), "trian"], { cwd: elsewhere, stdout: "pipe", stderr: "pipe" });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr.toString()).toContain('zeromoe: unknown command "trian"');
  }, 300_000);

  test("bun run install-command writes a working shim", () => {
    const bin = join(tmp, "bin");
    const p = Bun.spawnSync(["bash", join(ROOT, "scripts/install-command.sh"), bin], { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(0);
    expect(readFileSync(join(bin, "zeromoe"), "utf8")).toContain(`${ROOT.replace(/\/$/, "")}/core/src/cli/zeromoe.ts`);
    const h = Bun.spawnSync([join(bin, "zeromoe"), "--help"], { cwd: tmp, stdout: "pipe" });
    expect(h.exitCode).toBe(0);
    expect(h.stdout.toString()).toStartWith("usage: zeromoe <command>");
  });
});
