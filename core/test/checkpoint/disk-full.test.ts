/**
 * A really full disk under a real `bun run train` (not /dev/full standing in for one file): a
 * small tmpfs is mounted for the checkpoint directory (needs root and mount permission; the tests
 * skip, saying so, where mounting is refused).
 *
 * - The lock file cannot be written at start: the run used to print a stack trace from
 *   `writeSync`, whose message ("ENOSPC: no space left on device, write") named no path, and left
 *   an empty `zeromoe.lock` that refused the next run for 5 s as "a run that is writing its lock
 *   file now". Now: one line naming the lock file, exit 1, no lock file left.
 * - A save that runs out of space after earlier saves succeeded: exit 1 with one line naming the
 *   file being written, `latest` still names the last complete tag, which verifies and resumes.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, existsSync, mkdirSync, openSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { acquireCheckpointLock, LOCK_FILE } from "../../src/checkpoint/dir-lock.ts";
import { CheckpointWriteError } from "../../src/checkpoint/errors.ts";
import { locateCheckpoint, readManifest } from "../../src/checkpoint/manifest.ts";
import { ShardSource } from "../../src/checkpoint/shard-source.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-diskfull-"));
const TRAIN = resolve(import.meta.dir, "../../src/cli/train.ts");
const mounts: string[] = [];

/** Mount a tmpfs of `kib` KiB at a fresh directory; null when mounting is not permitted here. */
function smallDisk(kib: number): string | null {
  const at = join(ROOT, `fs${mounts.length}`);
  mkdirSync(at);
  const r = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", `size=${kib}k`, "tmpfs", at]);
  if (r.exitCode !== 0) return null;
  mounts.push(at);
  return at;
}

/** Write zeros into `dir/fill` until the file system is full (ENOSPC). */
function fill(dir: string): void {
  const chunk = new Uint8Array(4096);
  const fd = openSync(join(dir, "fill"), "w");
  try {
    for (;;) writeSync(fd, chunk);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOSPC") throw e;
  } finally {
    closeSync(fd);
  }
}

afterAll(() => {
  for (const m of mounts) Bun.spawnSync(["umount", m]);
  rmSync(ROOT, { recursive: true, force: true });
});

const canMount = smallDisk(64) !== null;
if (!canMount) console.warn("disk-full.test: skipped (mounting a tmpfs needs root and mount permission)");

function job(dir: string, extra: Record<string, unknown> = {}): string {
  const file = join(ROOT, `job-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify({
    model: { model_type: "llama", vocab_size: 256, hidden_size: 48, intermediate_size: 67, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 32 },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 13 },
    seed: 3, backend: "cpu", world_size: 2, steps: 400, eval_interval: 0,
    train_micro_batch_size_per_gpu: 2, gradient_accumulation_steps: 1,
    optimizer: { type: "AdamW", params: { lr: 1e-3 } }, zero_optimization: { stage: 2 }, steps_per_print: 1,
    checkpoint: { dir, save_interval: 2, keep_last: 0 },
    ...extra,
  }));
  return file;
}

describe("disk full", () => {
  test.skipIf(!canMount)("the lock file cannot be written: CheckpointWriteError naming it, no empty lock left, the next run is not refused", () => {
    const disk = smallDisk(64)!;
    const dir = join(disk, "ck");
    mkdirSync(dir);
    fill(disk);
    let err: unknown = null;
    try {
      acquireCheckpointLock(dir).release();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CheckpointWriteError);
    expect((err as Error).message).toBe(`${join(dir, LOCK_FILE)}: cannot write the lock file: no space left on device (ENOSPC)`);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    // space again: the lock is taken at once (an empty file left behind refused it for 5 s)
    rmSync(join(disk, "fill"));
    const lock = acquireCheckpointLock(dir);
    expect(JSON.parse(readFileSync(lock.file, "utf8")).pid).toBe(process.pid);
    lock.release();
  });

  test.skipIf(!canMount)("bun run train on a full disk: one line naming the lock file, exit 1, no stack", () => {
    const disk = smallDisk(64)!;
    const dir = join(disk, "ck");
    fill(disk);
    const r = Bun.spawnSync(["bun", TRAIN, "--config", job(dir), "--steps", "2"], { env: { ...process.env, CI: "1" } });
    const err = r.stderr.toString();
    expect(r.exitCode, err).toBe(1);
    expect(err.trim()).toBe(`error: ${join(dir, LOCK_FILE)}: cannot write the lock file: no space left on device (ENOSPC)`);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  }, 300_000);

  test.skipIf(!canMount)("a save runs out of space: the file is named, exit 1, latest names the last complete tag, which resumes", () => {
    // a checkpoint of this model takes ~0.55 MiB: three fit in 2 MiB, the fourth does not
    const disk = smallDisk(2048)!;
    const dir = join(disk, "ck");
    const file = job(dir);
    const r = Bun.spawnSync(["bun", TRAIN, "--config", file], { env: { ...process.env, CI: "1" } });
    const err = r.stderr.toString();
    expect(r.exitCode, err).toBe(1);
    const m = /^error: rank (\d): (\S+): cannot (?:write|create)[^:]*: no space left on device \(ENOSPC\)$/m.exec(err);
    expect(m, err).not.toBeNull();
    expect(err).not.toContain("    at ");
    expect(err.trim().split("\n").length).toBe(1);
    // the failing write is a file of the save in progress (its rank file or manifest), or, rarely,
    // `latest.tmp` after the new tag was renamed into place: either way latest names the tag before
    const failed = m![2]!;
    const failedTag = /\/(global_step\d+)\.tmp\/[^/]+$/.exec(failed)?.[1] ?? null;
    expect(failedTag !== null || failed === join(dir, "latest.tmp"), failed).toBe(true);
    const loc = locateCheckpoint(dir);
    expect(loc.tag).not.toBe(failedTag);
    const man = readManifest(loc.tagDir);
    const tags = readdirSync(dir).filter((e) => /^global_step\d+$/.test(e)).map((e) => Number(e.slice("global_step".length)));
    expect(man.global_steps).toBe(Math.max(...tags) - (failedTag === null ? 2 : 0));
    if (failedTag !== null) expect(Number(failedTag.slice("global_step".length))).toBe(man.global_steps + 2);
    const src = new ShardSource(loc.tagDir, man);
    try {
      src.verifyAll();
    } finally {
      src.close();
    }
    expect(readdirSync(dir)).not.toContain(LOCK_FILE);
    // resume from it to the step that failed, on a disk with room again: same loss as the first run
    const out = join(ROOT, "resumed.json");
    if (failedTag !== null) rmSync(join(dir, `${failedTag}.tmp`), { recursive: true });
    for (const e of readdirSync(dir)) if (e.startsWith("global_step") && e !== loc.tag) rmSync(join(dir, e), { recursive: true });
    const more = Bun.spawnSync(["bun", TRAIN, "--config", file, "--resume", dir, "--steps", String(man.global_steps + 1), "--summary", out], { env: { ...process.env, CI: "1" } });
    expect(more.exitCode, more.stderr.toString()).toBe(0);
    const s = JSON.parse(readFileSync(out, "utf8")) as { start_step: number; losses: number[] };
    expect(s.start_step).toBe(man.global_steps);
    const first = new RegExp(`^step +${man.global_steps + 1}/400 \\| loss (\\S+)`, "m").exec(r.stdout.toString());
    expect(first, r.stdout.toString().slice(-2000)).not.toBeNull();
    expect(s.losses[0]!.toFixed(4)).toBe(first![1]!);
  }, 300_000);
});

describe("disk full: export", () => {
  test.skipIf(!canMount)("zero-to-fp32 onto a full disk: one line naming the file, exit 1, no stack, no partial output", () => {
    const ck = join(ROOT, "export-ck");
    const t = Bun.spawnSync(["bun", TRAIN, "--config", job(ck), "--steps", "1"], { env: { ...process.env, CI: "1" } });
    expect(t.exitCode, t.stderr.toString()).toBe(0);
    const disk = smallDisk(128)!;
    const out = join(disk, "model.safetensors");
    const r = Bun.spawnSync(["bun", resolve(import.meta.dir, "../../src/cli/zero-to-fp32.ts"), ck, out]);
    const err = r.stderr.toString();
    expect(r.exitCode, err).toBe(1);
    expect(err.trim(), err).toMatch(new RegExp(`^error: ${disk}/\\.model\\.safetensors\\.tmp-\\d+-\\w+: cannot write: no space left on device \\(ENOSPC\\)$`));
    expect(readdirSync(disk)).toEqual([]);
  }, 300_000);
});

describe("disk full: --summary", () => {
  test.skipIf(!canMount)("the summary cannot be written: one line naming it after the done line, exit 1, no empty file left", () => {
    const disk = smallDisk(64)!;
    fill(disk);
    const out = join(disk, "s.json");
    const r = Bun.spawnSync(["bun", TRAIN, "--config", job(join(ROOT, "summary-ck")), "--steps", "1", "--summary", out], { env: { ...process.env, CI: "1" } });
    const err = r.stderr.toString();
    expect(r.exitCode, err).toBe(1);
    expect(r.stdout.toString()).toMatch(/^done +1 step /m);
    expect(err.trim()).toBe(`error: ${out}: cannot write: no space left on device (ENOSPC)`);
    expect(readdirSync(disk)).toEqual(["fill"]);
  }, 300_000);
});
