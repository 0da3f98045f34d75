/**
 * `kill -9` while NVMe optimizer states are being written loses nothing: a real run
 * (`core/src/cli/train.ts`, optimizer states on NVMe, checkpoint every 2 steps) is SIGKILLed during
 * a later step. The write-back is made to dominate the step (4 KiB blocks, one request at a time:
 * ~1,400 sequential writes per step), so the kill lands in it. The NVMe files are working state; the
 * checkpoint holds its own copy of the states (fsync'd, renamed into place), so `--resume` continues
 * exactly: its losses equal the uninterrupted run's from the resumed step on.
 */
import { afterAll, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT, TRAIN_CLI, runTrainCli } from "./fixtures/train-cli.ts";
import { scriptArgv, sleep, spawn } from "@zeromoe/kernels/runtime";

const ROOT = mkdtempSync(join(tmpdir(), "offload-kill-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

function jobFile(name: string, ckpt: string): string {
  const job = {
    model: { model_type: "llama", vocab_size: 256, hidden_size: 128, intermediate_size: 352, num_hidden_layers: 2, num_attention_heads: 4, max_position_embeddings: 32 },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 },
    backend: "cpu", steps: 8, seed: 11, train_micro_batch_size_per_gpu: 1, steps_per_print: 1,
    optimizer: { type: "AdamW", params: { lr: 1e-3 } },
    zero_optimization: { stage: 1, offload_optimizer: { device: "nvme", nvme_path: join(ROOT, "nvme"), buffer_count: 6 } },
    aio: { block_size: 4096, queue_depth: 1, thread_count: 1, single_submit: true, overlap_events: false },
    checkpoint: { dir: ckpt, save_interval: 2 },
  };
  const p = join(ROOT, name);
  writeFileSync(p, JSON.stringify(job));
  return p;
}

test("kill -9 during NVMe write-back, then --resume: the same losses as the uninterrupted run", async () => {
  const straightSummary = join(ROOT, "straight.json");
  const straight = await runTrainCli(["--config", jobFile("a.json", join(ROOT, "ck-a")), "--summary", straightSummary]);
  expect(straight.code).toBe(0);
  const want: number[] = JSON.parse(readFileSync(straightSummary, "utf8")).losses;
  expect(want.length).toBe(8);

  const ck = join(ROOT, "ck-b");
  const job = jobFile("b.json", ck);
  const p = spawn([...scriptArgv(TRAIN_CLI), "--config", job], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
  // wait for the checkpoint after step 4, then kill inside step 5 or 6 (their NVMe write-back)
  const reader = p.stdout!.getReader();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
    const at = text.indexOf("step 4/8");
    if (at >= 0 && text.slice(at).includes("checkpoint")) break;
  }
  await sleep(30);
  p.kill(9);
  const code = await p.exited;
  expect(code === 137 || p.signalCode === "SIGKILL").toBe(true);
  expect(text).not.toContain("done       "); // it was killed mid-run

  const resumedSummary = join(ROOT, "resumed.json");
  const resumed = await runTrainCli(["--config", job, "--resume", ck, "--summary", resumedSummary]);
  expect(resumed.code).toBe(0);
  const s = JSON.parse(readFileSync(resumedSummary, "utf8"));
  expect(s.start_step).toBeGreaterThanOrEqual(4);
  expect(s.losses).toEqual(want.slice(s.start_step));
}, 300_000);
