/**
 * A whole `--launcher mpi` job stopped with SIGSTOP for 3× its collective timeout (the launcher,
 * mpirun and every rank, as Ctrl-Z or a paused VM would) continues after SIGCONT and trains on with
 * the same losses as an uninterrupted run (issue 32: it died with a CommTimeoutError and a stack,
 * because the mpi transport's timeout was wall time; the local transport's already counted only
 * waiting time, core/test/comm/pause.test.ts). And, as with the local transport, one stuck rank is
 * still named: one rank stopped alone makes the other's collective time out naming it.
 * Collective timeout 3 s (ZEROMOE_COMM_TIMEOUT_S); the pause 9 s. Hang guards only: no timing is
 * asserted.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { MPI_AVAILABLE } from "../comm/mpi/mpi-available.ts";

const TRAIN = fileURLToPath(new URL("../../src/cli/train.ts", import.meta.url));
const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-mpi-pause-"));
const started: string[] = [];
afterAll(() => {
  for (const id of started) for (const p of marked(id)) signal(p, "SIGKILL");
  rmSync(ROOT, { recursive: true, force: true });
});

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/** Live processes whose environment holds ZEROMOE_TEST_RUN=<id> (launcher, mpirun, ranks). */
function marked(id: string, extra?: string): number[] {
  const want = `ZEROMOE_TEST_RUN=${id}`;
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "latin1");
      const state = stat[stat.lastIndexOf(")") + 2];
      if (state === "Z" || state === "X") continue;
      const env = readFileSync(`/proc/${d}/environ`, "latin1").split("\0");
      if (env.includes(want) && (extra === undefined || env.includes(extra))) out.push(Number(d));
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

const JOB = {
  model: { model_type: "mixtral", vocab_size: 256, hidden_size: 24, intermediate_size: 20, num_hidden_layers: 2, num_attention_heads: 3,
    num_key_value_heads: 1, num_local_experts: 4, num_experts_per_tok: 2, max_position_embeddings: 32 },
  data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 },
  eval_interval: 0, backend: "cpu", train_micro_batch_size_per_gpu: 2, steps_per_print: 1,
  zero_optimization: { stage: 3 }, moe: { ep_size: 2 },
};

let n = 0;
/** Start an mpi run of `steps` steps at world 2 (output to a file: an orphan would hold a pipe). */
function start(steps: number): { proc: Bun.Subprocess; id: string; log: string } {
  const job = join(ROOT, `job${n}.json`);
  writeFileSync(job, JSON.stringify({ ...JOB, steps }));
  const id = `${process.pid}-${n}`;
  const log = join(ROOT, `log${n++}.txt`);
  started.push(id);
  const proc = Bun.spawn([process.execPath, TRAIN, "--config", job, "--launcher", "mpi", "--world-size", "2"], {
    stdin: "ignore", stdout: Bun.file(log), stderr: Bun.file(log), env: { ...process.env, CI: "1", ZEROMOE_TEST_RUN: id, ZEROMOE_COMM_TIMEOUT_S: "3" },
  });
  return { proc, id, log };
}

const losses = (text: string) => [...text.matchAll(/^step +(\d+)\/\d+ \| loss ([\d.]+)/gm)].map((m) => [Number(m[1]), m[2]] as const);
const logOf = (p: string) => (existsSync(p) ? readFileSync(p, "utf8") : "");

async function untilStep(log: string, proc: Bun.Subprocess, step: number): Promise<void> {
  for (let i = 0; i < 2400 && proc.exitCode === null; i++) {
    if (losses(logOf(log)).some(([s]) => s >= step)) return;
    await Bun.sleep(50);
  }
  throw new Error(`the run did not reach step ${step} (exit ${proc.exitCode}): ${logOf(log).slice(-1500)}`);
}

describe.skipIf(!MPI_AVAILABLE)("SIGSTOP of an mpi job", () => {
  const STEPS = 20;
  let reference: (readonly [number, string])[] = [];

  test("reference: the same job uninterrupted", async () => {
    const { proc, log } = start(STEPS);
    const code = await proc.exited;
    expect(code, logOf(log).slice(-2000)).toBe(0);
    reference = losses(logOf(log));
    expect(reference.length).toBe(STEPS);
  }, 300_000);

  test("the whole job stopped for 3× the 3 s timeout continues after SIGCONT with the same losses", async () => {
    const { proc, id, log } = start(STEPS);
    await untilStep(log, proc, 3);
    const all = marked(id);
    expect(all.length, "launcher, mpirun and two ranks").toBeGreaterThanOrEqual(4);
    for (const p of all) signal(p, "SIGSTOP");
    await Bun.sleep(9000);
    for (const p of all) signal(p, "SIGCONT");
    const code = await proc.exited;
    const text = logOf(log);
    expect(code, text.slice(-2000)).toBe(0);
    expect(text).not.toContain("CommTimeoutError");
    expect(losses(text)).toEqual(reference);
  }, 300_000);

  test("one rank stopped for 3× the timeout: the other's collective times out naming it, no stack trace", async () => {
    const { proc, id, log } = start(100_000);
    await untilStep(log, proc, 3);
    const rank1 = marked(id, "OMPI_COMM_WORLD_RANK=1");
    expect(rank1.length).toBe(1);
    signal(rank1[0]!, "SIGSTOP");
    for (let i = 0; i < 1200 && proc.exitCode === null; i++) await Bun.sleep(50);
    signal(rank1[0]!, "SIGCONT");
    for (const p of marked(id)) if (proc.exitCode === null) signal(p, "SIGCONT");
    const exited = await Promise.race([proc.exited.then(() => true), Bun.sleep(120_000).then(() => false)]);
    expect(exited, "the job did not end").toBe(true);
    const text = logOf(log);
    expect(proc.exitCode, text.slice(-2000)).not.toBe(0);
    expect(text).toMatch(/timed out after 3 s waiting for rank\(s\) \[1\]/);
  }, 300_000);
});
