/**
 * Temporary directories of saves that never finished (`<tag>.tmp/`: a `kill -9`, or a disk that
 * filled mid-save; `<tag>.old.tmp/`: a kill while an existing tag was being replaced) used to stay
 * in the checkpoint directory until a save of that very tag, i.e. usually forever once the run
 * resumed with another save_interval or stopped at another step, each as large as a checkpoint —
 * on a disk that had filled up, they kept it full. Now rank 0 removes them after every successful
 * save (the directory is locked to one run, so no other save is in progress there). Files and
 * directories that are not a tag's temporary directory are left alone.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-stale-tmp-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const TRAIN = resolve(import.meta.dir, "../../src/cli/train.ts");

test("a successful save removes stale <tag>.tmp and <tag>.old.tmp directories, nothing else", () => {
  const dir = join(ROOT, "ck");
  for (const d of ["global_step7.tmp", "global_step12.old.tmp", "mine.tmp.d"]) {
    mkdirSync(join(dir, d), { recursive: true });
    writeFileSync(join(dir, d, "rank_00000.zmck"), new Uint8Array(1000));
  }
  writeFileSync(join(dir, "notes.tmp"), "a user's file");
  const job = join(ROOT, "job.json");
  writeFileSync(job, JSON.stringify({
    model: { model_type: "llama", vocab_size: 256, hidden_size: 16, intermediate_size: 23, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 32 },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 11 },
    backend: "cpu", world_size: 2, steps: 2, eval_interval: 0, train_micro_batch_size_per_gpu: 1,
    optimizer: { type: "AdamW", params: { lr: 1e-3 } }, checkpoint: { dir, save_interval: 1, keep_last: 0 },
  }));
  const r = Bun.spawnSync(["bun", TRAIN, "--config", job], { env: { ...process.env, CI: "1" } });
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  expect(readdirSync(dir).sort()).toEqual(["global_step1", "global_step2", "latest", "mine.tmp.d", "notes.tmp"]);
}, 300_000);
