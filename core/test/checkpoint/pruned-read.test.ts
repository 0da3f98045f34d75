/**
 * A zero-to-fp32 read that loses a race with `checkpoint.keep_last` pruning (issue 36): the reader
 * located the tag `latest` named, then the running job saved a newer tag and removed the old one
 * before the reader opened it. That reported "manifest.json: not found" / ENOENT, which reads like
 * a damaged checkpoint; now the error says the tag was removed while being read and names the
 * newest tag. The race is replayed deterministically: locate, then prune, then read; and the two
 * other windows a run of 60 zero-to-fp32s beside a job saving every step with keep_last 1 hit
 * ("has no manifest.json" when `latest` was read just before it moved on; ENOENT on a rank file that
 * pruning removed before the manifest), with the job's next move made by a child process. Through the
 * real CLI, a damaged tag (manifest.json present, a rank file missing) still reads as damage.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { zeroToFp32 } from "../../src/checkpoint/consolidate.ts";
import { CheckpointError } from "../../src/checkpoint/errors.ts";
import { locateCheckpoint, readManifest } from "../../src/checkpoint/manifest.ts";
import { loadInferenceModel } from "../../src/cli/model-source.ts";
import { thrown } from "./thrown.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-pruned-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const CLI = resolve(import.meta.dir, "../../src/cli");
const CK = join(ROOT, "ck");

beforeAll(() => {
  const job = join(ROOT, "job.json");
  writeFileSync(job, JSON.stringify({
    model: { model_type: "llama", vocab_size: 256, hidden_size: 16, intermediate_size: 23, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 32 },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 11 },
    backend: "cpu", world_size: 2, steps: 3, eval_interval: 0, train_micro_batch_size_per_gpu: 1,
    optimizer: { type: "AdamW", params: { lr: 1e-3 } }, checkpoint: { dir: CK, save_interval: 1, keep_last: 2 },
  }));
  const r = Bun.spawnSync(["bun", join(CLI, "train.ts"), "--config", job], { env: { ...process.env, CI: "1" }, timeout: 300_000 });
  expect(r.exitCode, r.stderr.toString()).toBe(0);
}, 300_000);

test("the tag `latest` named is pruned between locating and reading it: said as such, newest named", () => {
  // the reader's view: `latest` still named global_step2 when it looked
  writeFileSync(join(CK, "latest"), "global_step2");
  const loc = locateCheckpoint(CK);
  expect(loc.tag).toBe("global_step2");
  // the job's next save: latest moves on, keep_last removes the old tag
  writeFileSync(join(CK, "latest"), "global_step3");
  renameSync(join(CK, "global_step2"), join(ROOT, "gone"));
  // what the reader used to do next: a message that reads like damage
  expect(thrown(() => readManifest(loc.tagDir)).message).toContain("manifest.json: not found");
  const e = thrown(() => zeroToFp32(loc, join(ROOT, "out.safetensors")));
  expect(e).toBeInstanceOf(CheckpointError);
  expect(e.message).toContain(`tag "global_step2" was removed while it was being read (pruned by checkpoint.keep_last`);
  expect(e.message).toContain(`the newest tag is now "global_step3"`);
  expect(e.message).not.toContain("ENOENT");
  renameSync(join(ROOT, "gone"), join(CK, "global_step2"));
});

/** Run `sh -c script` in the background (a saving job's next move, 0.2 s from now). */
function later(script: string): Bun.Subprocess {
  return Bun.spawn(["sh", "-c", `sleep 0.2; ${script}`]);
}

test("`latest` read just before the job moved it on and pruned the tag: said as such by locate, eval and zero-to-fp32", async () => {
  // before: "has no manifest.json (missing tag or an interrupted save)", which reads like damage
  for (const read of [() => locateCheckpoint(CK), () => zeroToFp32(CK, join(ROOT, "out2.safetensors")), () => loadInferenceModel({ from: CK, backend: "cpu", probeTokens: 1 })]) {
    writeFileSync(join(CK, "latest"), "global_step2");
    renameSync(join(CK, "global_step2"), join(ROOT, "gone"));
    const job = later(`printf global_step3 > '${join(CK, "latest")}'`);
    let e: Error | null = null;
    try {
      await read();
    } catch (err) {
      e = err as Error;
    }
    await job.exited;
    renameSync(join(ROOT, "gone"), join(CK, "global_step2"));
    expect(e).toBeInstanceOf(CheckpointError);
    expect(e!.message).toContain(`tag "global_step2" that "latest" named was removed while it was being located (pruned by checkpoint.keep_last`);
    expect(e!.message).toContain(`the newest tag is now "global_step3"`);
  }
}, 300_000);

test("pruning removed a rank file before the manifest: zero-to-fp32 says the tag was pruned, not ENOENT", async () => {
  writeFileSync(join(CK, "latest"), "global_step2");
  const loc = locateCheckpoint(CK);
  // the job's next save: `latest` moves on, then keep_last removes the old tag's files one by one
  writeFileSync(join(CK, "latest"), "global_step3");
  const rank = join(CK, "global_step2", "rank_00001.zmck");
  const manifest = join(CK, "global_step2", "manifest.json");
  renameSync(rank, join(ROOT, "rank.away"));
  const job = later(`mv '${manifest}' '${join(ROOT, "manifest.away")}'`);
  const e = thrown(() => zeroToFp32(loc, join(ROOT, "out3.safetensors")));
  await job.exited;
  renameSync(join(ROOT, "rank.away"), rank);
  renameSync(join(ROOT, "manifest.away"), manifest);
  // before: "rank_00001.zmck: cannot open: ENOENT: no such file or directory"
  expect(e).toBeInstanceOf(CheckpointError);
  expect(e.message).toContain(`tag "global_step2" was removed while it was being read (pruned by checkpoint.keep_last`);
  expect(e.message).toContain(`the newest tag is now "global_step3"`);
  expect(e.message).not.toContain("ENOENT");
}, 300_000);

test("zero-to-fp32 CLI: a tag whose rank file is missing is still damage (exit 2, one line)", () => {
  const f = join(CK, "global_step3", "rank_00001.zmck");
  renameSync(f, `${f}.away`);
  try {
    const r = Bun.spawnSync(["bun", join(CLI, "zero-to-fp32.ts"), CK, join(ROOT, "x.safetensors")], { timeout: 300_000 });
    expect(r.exitCode).toBe(2);
    const err = r.stderr.toString().trim();
    expect(err.split("\n").length).toBe(1);
    expect(err).toContain("rank_00001.zmck");
    expect(err).not.toContain("was removed while it was being read");
  } finally {
    renameSync(`${f}.away`, f);
  }
  const ok = Bun.spawnSync(["bun", join(CLI, "zero-to-fp32.ts"), CK, join(ROOT, "y.safetensors")], { timeout: 300_000 });
  expect(ok.exitCode, ok.stderr.toString()).toBe(0);
}, 300_000);
