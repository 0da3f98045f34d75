/**
 * Issue 18 end to end, through `bun core/src/cli/train.ts` as a real process (tiny llama, world 2,
 * cpu backend): a rank file swapped in from another save, an edited manifest, restored scalar state
 * out of range, and diverging runs (lr 1e10; fp16 with a static scale of 2^40 or 1e-10). Each must
 * end with the documented exit status and a one-line message without a stack trace; a diverging
 * run writes no checkpoint after its first non-finite loss and keep_last keeps the last good one.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { TINY_LLAMA_CLI_JOB } from "../tiny-llama-cli.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-hostile-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const TRAIN = resolve(import.meta.dir, "../../src/cli/train.ts");

const JOB = { ...TINY_LLAMA_CLI_JOB, steps: 4, steps_per_print: 1 };

let n = 0;
function jobFile(over: Record<string, unknown>): { file: string; dir: string } {
  const dir = join(ROOT, `ck${n}`);
  const file = join(ROOT, `job${n++}.json`);
  writeFileSync(file, JSON.stringify({ ...JOB, checkpoint: { dir, save_interval: 2, keep_last: 0 }, ...over }));
  return { file, dir };
}

function train(args: string[]): { code: number; stdout: string; stderr: string } {
  const r = Bun.spawnSync(["bun", TRAIN, ...args], { env: { ...process.env, CI: "1" } });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

/** A one-line error: exactly one non-empty stderr line, starting "error: ", no stack frames. */
function oneLine(stderr: string): string {
  const lines = stderr.split("\n").filter((l) => l.trim() !== "");
  expect(lines.length, stderr).toBe(1);
  expect(lines[0]).toStartWith("error: ");
  expect(stderr).not.toMatch(/^\s+at /m);
  return lines[0]!;
}

/** Re-sign an edited manifest text by the documented rule (docs/checkpoints.md): SHA-256 of the
 * text with the 64 digits of manifest_sha256 replaced by zeros. Independent of manifest.ts. */
function resign(text: string): string {
  const zero = text.replace(/("manifest_sha256": ?")[0-9a-f]{64}"/, `$1${"0".repeat(64)}"`);
  const digest = new Bun.CryptoHasher("sha256").update(zero).digest("hex");
  return zero.replace(/("manifest_sha256": ?")0{64}"/, `$1${digest}"`);
}

describe("damaged or mixed checkpoints on --resume: exit 2, one line naming the file", () => {
  const { file, dir } = jobFile({});
  let first: ReturnType<typeof train> | null = null;
  const setup = () => (first ??= train(["--config", file]));

  test("a rank file copied from another save is refused naming it and the tag", () => {
    expect(setup().code, first!.stderr).toBe(0);
    const mixed = join(ROOT, "mixed");
    rmSync(mixed, { recursive: true, force: true });
    Bun.spawnSync(["cp", "-r", dir, mixed]);
    rmSync(join(mixed, "zeromoe.lock"), { force: true });
    copyFileSync(join(mixed, "global_step2", "rank_00001.zmck"), join(mixed, "global_step4", "rank_00001.zmck"));
    const r = train(["--config", file, "--resume", join(mixed, "global_step4"), "--steps", "6"]);
    expect(r.code, r.stderr).toBe(2);
    const line = oneLine(r.stderr);
    expect(line).toContain(join(mixed, "global_step4", "rank_00001.zmck"));
    expect(line).toContain(`belongs to checkpoint tag "global_step2"`);
    expect(r.stdout).not.toMatch(/^step /m);
  }, 300_000);

  test("an edited manifest fails its checksum; re-signed, out-of-range scalars are named", () => {
    expect(setup().code, first!.stderr).toBe(0);
    const mf = join(dir, "global_step4", "manifest.json");
    const original = readFileSync(mf, "utf8");
    try {
      writeFileSync(mf, original.replace(/"global_steps": 4/, `"global_steps": 40`));
      let r = train(["--config", file, "--resume", dir, "--steps", "6"]);
      expect(r.code, r.stderr).toBe(2);
      expect(oneLine(r.stderr)).toMatch(/manifest\.json: checksum mismatch \(manifest_sha256\)/);

      const cases: [RegExp, string, RegExp][] = [
        [/"cur_scale": [^,\n]+/, `"cur_scale": 1e999`, /manifest\.json: field loss_scaler\.cur_scale: expected a finite number/],
        [/"cur_scale": [^,\n]+/, `"cur_scale": -2`, /manifest\.json: field loss_scaler\.cur_scale/],
        [/"last_batch_iteration": [^,\n}]+/, `"last_batch_iteration": 1e300`, /manifest\.json: field scheduler\.last_batch_iteration/],
        [/"data_position": \{[^}]*\}/, `"data_position": {"epoch": 0, "index": "x", "micro": 0}`, /manifest\.json: field data_position\.index/],
        // in range for the reader, outside this dataset: named by the loader's check
        [/"data_position": \{[^}]*\}/, `"data_position": {"epoch": 0, "index": 999999999, "micro": 0}`, /manifest\.json: field data_position: expected/],
        [/"client_state": null/, `"client_state": ${"[".repeat(100000)}${"]".repeat(100000)}`, /manifest\.json: at client_state.*nesting deeper than/],
      ];
      for (const [re, rep, want] of cases) {
        const edited = original.replace(re, rep);
        expect(edited).not.toBe(original);
        writeFileSync(mf, resign(edited));
        r = train(["--config", file, "--resume", dir, "--steps", "6"]);
        expect(r.code, `${rep}: ${r.stderr}`).toBe(2);
        expect(oneLine(r.stderr)).toMatch(want);
      }
    } finally {
      writeFileSync(mf, original);
    }
    // the intact checkpoint still resumes
    const ok = train(["--config", file, "--resume", dir, "--steps", "5"]);
    expect(ok.code, ok.stderr).toBe(0);
  }, 300_000);
});

describe("divergence policy: stop with exit 4 and a one-line message; no checkpoint after the first non-finite loss", () => {
  test("lr 1e10: stops after max_bad_steps, names step and last finite loss; keep_last keeps the last good tag", () => {
    const { file, dir } = jobFile({ steps: 40, optimizer: { type: "AdamW", params: { lr: 1e10 } }, max_bad_steps: 5, checkpoint: undefined });
    const job = JSON.parse(readFileSync(file, "utf8"));
    job.checkpoint = { dir, save_interval: 1, keep_last: 2 };
    writeFileSync(file, JSON.stringify(job));
    const r = train(["--config", file]);
    expect(r.code, r.stderr).toBe(4);
    const line = oneLine(r.stderr);
    expect(line).toMatch(/^error: training diverged: 5 consecutive bad steps \((\d+)–(\d+); first: loss NaN\), last finite loss -?\d+\.\d{4} at step (\d+)\. .*Try: a lower learning rate/);
    const [, from, to, lastFinite] = /\((\d+)–(\d+);.*at step (\d+)\./.exec(line)!.map(Number);
    expect(to! - from! + 1).toBe(5);
    expect(lastFinite).toBe(from! - 1);
    // checkpoints: none after the first non-finite loss; the newest is the last good step's
    const tags = readdirSync(dir).filter((t) => t.startsWith("global_step")).map((t) => Number(t.slice(11))).sort((a, b) => a - b);
    expect(tags.length).toBeGreaterThan(0);
    expect(Math.max(...tags)).toBe(from! - 1);
    expect(readFileSync(join(dir, "latest"), "utf8").trim()).toBe(`global_step${from! - 1}`);
    expect(r.stdout).toContain(`checkpoint not written at step ${from}`);
    expect(existsSync(join(dir, "zeromoe.lock"))).toBe(false);
  }, 300_000);

  test("fp16 with a static scale of 2^40 (every step skipped) stops at max_bad_steps (default 10)", () => {
    const { file } = jobFile({ steps: 30, fp16: { enabled: true, loss_scale: 2 ** 40 }, checkpoint: { dir: null } });
    const r = train(["--config", file]);
    expect(r.code, r.stderr).toBe(4);
    expect(oneLine(r.stderr)).toMatch(/training diverged: 10 consecutive bad steps \(1–10; first: step skipped: gradient norm/);
  }, 300_000);

  test("fp16 with a static scale of 1e-10 (gradients underflow to 0) stops too", () => {
    const { file } = jobFile({ steps: 30, fp16: { enabled: true, loss_scale: 1e-10 }, max_bad_steps: 3, checkpoint: { dir: null } });
    const r = train(["--config", file]);
    expect(r.code, r.stderr).toBe(4);
    expect(oneLine(r.stderr)).toMatch(/training diverged: 3 consecutive bad steps \(1–3; first: gradient norm 0 \(no update\)\)/);
  }, 300_000);

  test("max_bad_steps 0 never stops, but a run may not end 'finished' on a NaN loss", () => {
    const { file } = jobFile({ steps: 6, optimizer: { type: "AdamW", params: { lr: 1e10 } }, max_bad_steps: 0, checkpoint: { dir: null } });
    const r = train(["--config", file]);
    expect(r.code, r.stderr).toBe(4);
    expect(oneLine(r.stderr)).toMatch(/training diverged: \d+ consecutive bad steps \(\d+–6;/);
    expect(r.stdout).not.toMatch(/^done /m);
  }, 300_000);
});
