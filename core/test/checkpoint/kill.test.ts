/**
 * `kill -9` during a save: a real training run (`bun core/src/cli/train.ts`, world 2, ZeRO-2,
 * saving every step) is killed with SIGKILL while a save is in progress (its `<tag>.tmp` directory
 * exists). Afterwards `latest` names a complete tag whose manifest and every record verify, the
 * interrupted save is not what `latest` names, and `--resume` from the directory continues the run
 * (replacing the stale temporary directory when it saves again).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { locateCheckpoint, readManifest } from "../../src/checkpoint/manifest.ts";
import { ShardSource } from "../../src/checkpoint/shard-source.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-kill-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const TRAIN = resolve(import.meta.dir, "../../src/cli/train.ts");
const CKPT = join(ROOT, "ckpt");

const JOB = {
  model: {
    model_type: "llama", vocab_size: 256, hidden_size: 96, intermediate_size: 161, num_hidden_layers: 2,
    num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64,
  },
  data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 },
  seed: 5,
  backend: "cpu",
  world_size: 2,
  steps: 400,
  eval_interval: 0,
  train_micro_batch_size_per_gpu: 2,
  gradient_accumulation_steps: 1,
  optimizer: { type: "AdamW", params: { lr: 1e-3 } },
  zero_optimization: { stage: 2 },
  checkpoint: { dir: CKPT, save_interval: 1, keep_last: 3 },
  steps_per_print: 1000,
};

function verify(dir: string): { tag: string; step: number } {
  const loc = locateCheckpoint(dir);
  const m = readManifest(loc.tagDir);
  const src = new ShardSource(loc.tagDir, m);
  try {
    src.verifyAll();
    for (const u of m.units) src.readF32(u.name, "params", 0, u.numel);
  } finally {
    src.close();
  }
  return { tag: loc.tag, step: m.global_steps };
}

describe("kill -9 during a save", () => {
  test("the previous checkpoint stays intact, latest points at it, and --resume continues", async () => {
    const jobFile = join(ROOT, "job.json");
    writeFileSync(jobFile, JSON.stringify(JOB));
    const child = Bun.spawn(["bun", TRAIN, "--config", jobFile], { stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
    // wait for a first complete save, then for the next save to be in progress, and kill it
    const t0 = performance.now();
    let killedDuring: string | null = null;
    while (performance.now() - t0 < 60_000) {
      if (existsSync(join(CKPT, "latest"))) {
        const latest = readFileSync(join(CKPT, "latest"), "utf8").trim();
        const tmp = readdirSync(CKPT).find((e) => e.endsWith(".tmp") && e.startsWith("global_step") && e !== `${latest}.tmp` && !e.endsWith(".old.tmp"));
        if (tmp && existsSync(join(CKPT, tmp, "rank_00000.zmck"))) {
          child.kill("SIGKILL");
          killedDuring = tmp.slice(0, -4);
          break;
        }
      }
      if (child.exitCode !== null) break;
      Bun.sleepSync(0.2);
    }
    await child.exited;
    const stderr = await new Response(child.stderr).text();
    expect(killedDuring, `no save in progress was observed (child exit ${child.exitCode}): ${stderr.slice(-2000)}`).not.toBeNull();
    expect(child.signalCode).toBe("SIGKILL");

    const v = verify(CKPT);
    expect(v.tag).not.toBe(killedDuring);
    expect(v.step).toBeGreaterThanOrEqual(1);
    // the interrupted save left its temporary directory behind (proof the kill landed mid-save),
    // unless it was killed between the rename and the update of latest: then the new tag exists
    // complete while latest still names the previous one
    const left = existsSync(join(CKPT, `${killedDuring}.tmp`)) || existsSync(join(CKPT, killedDuring!));
    expect(left).toBe(true);

    // resume: a few more steps from latest, saving over the stale temporary directory
    // (a bare tag name is looked up under checkpoint.dir)
    const more = Bun.spawnSync(["bun", TRAIN, "--config", jobFile, "--resume", v.tag, "--steps", String(v.step + 2), "--summary", join(ROOT, "s.json")], { env: { ...process.env, CI: "1" } });
    expect(more.exitCode, more.stderr.toString().slice(-2000)).toBe(0);
    const summary = JSON.parse(readFileSync(join(ROOT, "s.json"), "utf8")) as { start_step?: number; steps: number };
    expect(summary.start_step).toBe(v.step);
    const after = verify(CKPT);
    expect(after.step).toBe(v.step + 2);
    expect(readdirSync(CKPT).filter((e) => e.startsWith("global_step") && !e.endsWith(".tmp")).length).toBeLessThanOrEqual(3);
  }, 300_000);

  test("SIGTERM and SIGINT: the run saves a checkpoint after the current step and exits 3 with a 'stopped' line", async () => {
    for (const sig of ["SIGTERM", "SIGINT"] as const) {
      const dir = join(ROOT, `sig-${sig}`);
      const jobFile = join(ROOT, `job-${sig}.json`);
      writeFileSync(jobFile, JSON.stringify({ ...JOB, checkpoint: { dir, save_interval: 3, keep_last: 0 } }));
      // SIGINT as under `bun run train` (which sets npm_lifecycle_event), SIGTERM started directly
      const { npm_lifecycle_event: _script, ...env } = process.env;
      const child = Bun.spawn(["bun", TRAIN, "--config", jobFile], { stdout: "pipe", stderr: "pipe", env: { ...env, CI: "1", ...(sig === "SIGINT" ? { npm_lifecycle_event: "train" } : {}) } });
      const t0 = performance.now();
      while (!existsSync(join(dir, "latest")) && child.exitCode === null && performance.now() - t0 < 60_000) Bun.sleepSync(2);
      child.kill(sig);
      const code = await child.exited;
      const stdout = await new Response(child.stdout).text();
      const stderr = await new Response(child.stderr).text();
      // 3: stopped by a signal after saving (not 0: a supervisor must tell it from a finished run)
      expect(code, stderr.slice(-2000)).toBe(3);
      expect(stdout).toMatch(new RegExp(`^stopped +by ${sig} after step \\d+ of ${JOB.steps}; checkpoint saved in .* \\(exit 3\\)$`, "m"));
      // under bun run, the line before bun's "error: script … exited with code 3" says it is the clean stop
      const note = `a clean stop, nothing lost: the "error: script "train" exited with code 3" bun run prints next is this status, not a failure`;
      if (sig === "SIGINT") expect(stdout).toContain(note);
      else expect(stdout).not.toContain("a clean stop, nothing lost");
      const m = /stopping\s+(SIG\w+) received: stopping after step (\d+) with a checkpoint/.exec(stdout);
      expect(m, stdout.slice(-2000)).not.toBeNull();
      expect(m![1]).toBe(sig);
      const v = verify(dir);
      expect(v.step).toBe(Number(m![2]));
      expect(v.step).toBeLessThan(JOB.steps);
      expect(v.tag).toBe(`global_step${v.step}`);
    }
  }, 300_000);
});
