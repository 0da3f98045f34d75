/**
 * `bun run train` checks the paths it writes after training before training starts.
 *
 * Regressions: `--summary <a directory>` trained, then died with an EISDIR stack trace (exit 1) and
 * wrote no summary; a `checkpoint.dir` that cannot be created (`/etc/passwd`, or under `/proc`)
 * trained until the first save, then died with an ENOENT/EEXIST stack trace, losing those steps.
 * Both are now user errors (exit 2, no stack trace) reported before any rank starts.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const CLI = resolve(import.meta.dir, "../../src/cli/train.ts");
const dir = mkdtempSync(join(tmpdir(), "zeromoe-train-paths-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Run the train CLI with `args`; returns exit status, stdout and stderr. */
async function train(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const p = Bun.spawn(["bun", CLI, ...args], { stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
  const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, stdout, stderr };
}

/** A small valid job whose checkpoint.dir is `ckptDir`. */
function job(ckptDir: string): string {
  const path = join(dir, `job-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify({
    model: { model_type: "llama", vocab_size: 256, hidden_size: 12, intermediate_size: 23, num_hidden_layers: 1, num_attention_heads: 3, max_position_embeddings: 16 },
    data: { dataset: "moby-dick", seq_len: 7 },
    steps: 3, train_micro_batch_size_per_gpu: 2, backend: "cpu",
    checkpoint: { dir: ckptDir, save_interval: 1 },
  }));
  return path;
}

describe("train: output paths are checked before training", () => {
  test("--summary naming a directory is a usage error; no rank starts", async () => {
    const r = await train(["--steps", "1", "--backend", "cpu", "--summary", dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--summary: ${dir} is a directory; expected a file path`);
    expect(r.stderr).not.toContain("    at ");
    expect(r.stdout).not.toContain("step ");
  }, 300_000);

  test("--summary under a regular file is a usage error", async () => {
    const file = join(dir, "plain-file");
    writeFileSync(file, "x");
    const r = await train(["--steps", "1", "--backend", "cpu", "--summary", join(file, "sub", "run.json")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--summary: ${file} is not a directory`);
  }, 300_000);

  test("a checkpoint.dir that cannot be created is a config error naming checkpoint.dir", async () => {
    const file = join(dir, "not-a-dir");
    writeFileSync(file, "x");
    for (const bad of [file, join(file, "ckpt")]) {
      const r = await train(["--config", job(bad)]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("checkpoint.dir: ");
      expect(r.stderr).not.toContain("    at ");
      expect(r.stdout).not.toContain("step ");
    }
  }, 300_000);

  test("a missing checkpoint.dir is created and used", async () => {
    const ck = join(dir, "new", "ckpt");
    const r = await train(["--config", job(ck), "--steps", "1"]);
    expect(r.code).toBe(0);
    expect(existsSync(join(ck, "latest"))).toBe(true);
  }, 300_000);
});
