/**
 * `bun run train --launcher mpi` is the parent of mpirun, which is the parent of the ranks. A
 * SIGTERM or SIGINT sent to that launcher process (a supervisor, `timeout`, `kill <pid>`) used to
 * end the launcher alone: mpirun and every rank went on training unseen, orphaned, writing
 * checkpoints and holding the checkpoint lock. SIGKILL of the launcher did the same (the ranks
 * watch their parent, which is mpirun, still alive). Now the launcher passes SIGINT/SIGTERM on to
 * mpirun (which ends its ranks) and exits 128 + the signal once mpirun is gone; and the ranks on the
 * launcher's host watch the launcher's pid, so its SIGKILL ends them (exit 129) and mpirun with them.
 *
 * A SIGTERM to one rank's process other than rank 0's stops every rank after the same step (they
 * agree on it), and the run exits 3 with its `stopped` line like a `local` run (it exited 0, "done",
 * since rank 0's process had received no signal).
 *
 * Every process of a run carries a marker in its environment (a ZEROMOE_* variable, forwarded to the
 * ranks by mpirun's -x), so the test finds them all. Hang guards only: no timing is asserted.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { MPI_AVAILABLE } from "../comm/mpi/mpi-available.ts";

const TRAIN = fileURLToPath(new URL("../../src/cli/train.ts", import.meta.url));
const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-mpi-signals-"));
const started: string[] = [];
afterAll(() => {
  for (const id of started) for (const p of marked(id)) kill(p, "SIGKILL");
  rmSync(ROOT, { recursive: true, force: true });
});

function kill(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/** Live (not zombie) processes whose environment holds ZEROMOE_TEST_RUN=<id>. */
function marked(id: string): number[] {
  const want = `ZEROMOE_TEST_RUN=${id}`;
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "latin1");
      const state = stat[stat.lastIndexOf(")") + 2];
      if (state === "Z" || state === "X") continue;
      if (readFileSync(`/proc/${d}/environ`, "latin1").split("\0").includes(want)) out.push(Number(d));
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

/** The process of mpi rank `rank` among those marked with `id`, or null. */
function rankProcess(id: string, rank: number): number | null {
  for (const pid of marked(id)) {
    try {
      if (readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(`OMPI_COMM_WORLD_RANK=${rank}`)) return pid;
    } catch {
      // gone
    }
  }
  return null;
}

/** Poll `f` every 100 ms until it is true or `ms` have passed; returns its last value. */
function waitFor(f: () => boolean, ms: number): boolean {
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    if (f()) return true;
    Bun.sleepSync(100);
  }
  return f();
}

let n = 0;

/** Start a long mpi run at world 2 and wait until it has saved a checkpoint (the ranks are training). */
function startRun(): { proc: Bun.Subprocess; id: string; log: string } {
  const dir = join(ROOT, `ck${n}`);
  const job = join(ROOT, `job${n++}.json`);
  writeFileSync(job, JSON.stringify({
    model: { model_type: "mixtral", vocab_size: 256, hidden_size: 24, intermediate_size: 20, num_hidden_layers: 2, num_attention_heads: 3,
      num_key_value_heads: 1, num_local_experts: 4, num_experts_per_tok: 2, max_position_embeddings: 32 },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 },
    steps: 1000000, eval_interval: 0, backend: "cpu", train_micro_batch_size_per_gpu: 2, steps_per_print: 1000,
    zero_optimization: { stage: 3 }, moe: { ep_size: 2 },
    checkpoint: { dir, save_interval: 2, keep_last: 2 },
  }));
  const id = `${process.pid}-${n}`;
  started.push(id);
  // output to a file: a pipe would stay open as long as any orphaned rank holds it
  const log = join(ROOT, `log${n}.txt`);
  const proc = Bun.spawn([process.execPath, TRAIN, "--config", job, "--launcher", "mpi", "--world-size", "2"], {
    stdin: "ignore", stdout: Bun.file(log), stderr: Bun.file(log), env: { ...process.env, CI: "1", ZEROMOE_TEST_RUN: id },
  });
  const up = waitFor(() => existsSync(join(dir, "latest")) || proc.exitCode !== null, 120_000);
  expect(up && proc.exitCode === null, `the run did not start training (exit ${proc.exitCode})`).toBe(true);
  // the launcher, mpirun and two ranks
  expect(marked(id).length).toBeGreaterThanOrEqual(4);
  return { proc, id, log };
}

describe.skipIf(!MPI_AVAILABLE)("signals to the --launcher mpi process", () => {
  for (const [sig, num] of [["SIGTERM", 15], ["SIGINT", 2]] as const) {
    test(`${sig} to the launcher: mpirun and every rank end, the launcher exits ${128 + num} after them`, async () => {
      const { proc, id, log } = startRun();
      proc.kill(sig);
      const exited = await Promise.race([proc.exited.then(() => true), Bun.sleep(120_000).then(() => false)]);
      expect(exited, "the launcher did not exit").toBe(true);
      expect(proc.exitCode, `signal ${proc.signalCode}: ${readFileSync(log, "utf8").slice(-2000)}`).toBe(128 + num);
      // the launcher waited for mpirun, which ended its ranks: nothing of the run is left (a rank
      // may take a moment to be reaped)
      expect(waitFor(() => marked(id).length === 0, 30_000), `left running: ${marked(id).join(", ")}`).toBe(true);
    }, 300_000);
  }

  test("SIGTERM to one rank's process (rank 1): all ranks stop after the same step with a checkpoint, exit 3 with a stopped line", async () => {
    const { proc, id, log } = startRun();
    const r1 = rankProcess(id, 1);
    expect(r1).not.toBeNull();
    process.kill(r1!, "SIGTERM");
    const exited = await Promise.race([proc.exited.then(() => true), Bun.sleep(120_000).then(() => false)]);
    expect(exited, "the launcher did not exit").toBe(true);
    const text = readFileSync(log, "utf8");
    // rank 0's process never received the signal: it used to report "done" and exit 0, as if the
    // run had finished its 1000000 steps
    expect(proc.exitCode, text.slice(-3000)).toBe(3);
    expect(text).toMatch(/^stopping +SIGTERM received: stopping after step (\d+) with a checkpoint$/m);
    expect(text).toMatch(/^stopped +by SIGTERM after step \d+ of 1000000; checkpoint saved in .* \(exit 3\)$/m);
    expect(waitFor(() => marked(id).length === 0, 30_000), `left running: ${marked(id).join(", ")}`).toBe(true);
  }, 300_000);

  test("SIGKILL of the launcher: the ranks notice (exit 129) and mpirun ends with them", async () => {
    const { proc, id } = startRun();
    proc.kill("SIGKILL");
    await proc.exited;
    expect(waitFor(() => marked(id).length === 0, 60_000), `left running after the launcher's SIGKILL: ${marked(id).join(", ")}`).toBe(true);
  }, 300_000);
});
