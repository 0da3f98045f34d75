/**
 * The trainer dies with its launcher (issue 18): SIGKILL of the `bun run train` wrapper — or of the
 * shell that started `bun core/src/cli/train.ts` — used to leave the trainer running with parent
 * pid 1, holding the checkpoint lock. Now it notices the new parent (launch/parent-watch.ts), exits
 * with status 129 and its exit handler removes the lock. Hang guards only: no timing is asserted.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { LOCK_FILE, processState } from "../../src/checkpoint/dir-lock.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-orphan-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const REPO = resolve(import.meta.dir, "../../..");
const TRAIN = resolve(REPO, "core/src/cli/train.ts");

function job(dir: string): string {
  const file = join(ROOT, `job-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify({
    model: { model_type: "llama", vocab_size: 256, hidden_size: 16, intermediate_size: 23, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 32 },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 11 },
    backend: "cpu", world_size: 2, steps: 1000000, train_micro_batch_size_per_gpu: 1, gradient_accumulation_steps: 1,
    optimizer: { type: "AdamW", params: { lr: 1e-3 } }, steps_per_print: 1,
    checkpoint: { dir, save_interval: 0, keep_last: 0 },
  }));
  return file;
}

/** Pids whose parent is `pid` (Linux /proc). */
function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** The trainer process under `root`: the descendant whose command line runs train.ts. */
function findTrainer(root: number): number | null {
  const stack = [root];
  while (stack.length > 0) {
    const p = stack.pop()!;
    for (const c of children(p)) {
      let cmd = "";
      try {
        cmd = readFileSync(`/proc/${c}/cmdline`, "utf8");
      } catch {
        continue;
      }
      if (cmd.includes("core/src/cli/train.ts")) return c;
      stack.push(c);
    }
  }
  return null;
}

const gone = (pid: number): boolean => {
  const s = processState(pid);
  return s === null || s === "Z" || s === "X";
};

/** Start `cmd`, wait for the trainer's first step line, SIGKILL the launcher, and check that the
 * trainer ends and its lock goes away. */
async function killLauncher(cmd: string[], dir: string): Promise<void> {
  const launcher = Bun.spawn(cmd, { cwd: REPO, stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
  const reader = launcher.stdout.getReader();
  let seen = "";
  while (!/^step /m.test(seen)) {
    const c = await reader.read();
    if (c.done) break;
    seen += new TextDecoder().decode(c.value);
  }
  expect(seen).toMatch(/^step /m);
  const trainer = findTrainer(launcher.pid);
  expect(trainer).not.toBeNull();
  expect(trainer).not.toBe(launcher.pid);
  expect(existsSync(join(dir, LOCK_FILE))).toBe(true);
  launcher.kill("SIGKILL");
  await launcher.exited;
  // hang guard: the test's own timeout; the trainer polls its parent every 0.5 s
  while (!gone(trainer!)) await Bun.sleep(50);
  while (existsSync(join(dir, LOCK_FILE))) await Bun.sleep(50);
  expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  // drain what the trainer wrote to the inherited pipes
  for (let c = await reader.read(); !c.done; c = await reader.read()) seen += new TextDecoder().decode(c.value);
  const stderr = await new Response(launcher.stderr).text();
  expect(stderr).toContain("error: the launcher (parent process");
}

describe("the trainer dies with its launcher and releases the checkpoint lock", () => {
  test("SIGKILL of the `bun run train` wrapper", async () => {
    const dir = join(ROOT, "a");
    await killLauncher(["bun", "run", "train", "--config", job(dir)], dir);
  }, 300_000);

  test("SIGKILL of the shell that started `bun core/src/cli/train.ts` (no bun run)", async () => {
    const dir = join(ROOT, "b");
    await killLauncher(["bash", "-c", `bun ${TRAIN} --config ${job(dir)} & wait`], dir);
  }, 300_000);
});
