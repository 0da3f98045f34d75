/**
 * Whole `bun run train --launcher mpi` runs for the tests that signal them (mpi-pause.test.ts,
 * mpi-launcher-signals.test.ts): a tiny world-2 MoE job, a run started with its output in a file,
 * and every process of a run found by a marker in its environment.
 *
 * Each run's processes (the launcher, mpirun, the ranks) carry `ZEROMOE_TEST_RUN=<id>` in their
 * environment (mpirun forwards ZEROMOE_* variables with -x), so a test can find and signal all of
 * them, and whatever is left when the file ends is SIGKILLed. Output goes to a file, not a pipe: an
 * orphaned rank would hold a pipe open.
 */
import { afterAll } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The trainer CLI. */
export const TRAIN = fileURLToPath(new URL("../../src/cli/train.ts", import.meta.url));

/** A small Mixtral job for two mpi ranks (ZeRO-3, ep_size 2, cpu backend); add `steps`, `steps_per_print`. */
export const MPI_MOE_JOB = {
  model: { model_type: "mixtral", vocab_size: 256, hidden_size: 24, intermediate_size: 20, num_hidden_layers: 2, num_attention_heads: 3,
    num_key_value_heads: 1, num_local_experts: 4, num_experts_per_tok: 2, max_position_embeddings: 32 },
  data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 },
  eval_interval: 0, backend: "cpu", train_micro_batch_size_per_gpu: 2,
  zero_optimization: { stage: 3 }, moe: { ep_size: 2 },
};

/** `process.kill` that ignores a process already gone. */
export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/**
 * Live (not zombie) processes whose environment holds ZEROMOE_TEST_RUN=<id>, and also `extra`
 * (e.g. `OMPI_COMM_WORLD_RANK=1`) when given. Reads /proc (Linux).
 */
export function marked(id: string, extra?: string): number[] {
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

/** One started run: the launcher process, its marker id and its log file. */
export interface MpiRun {
  proc: Bun.Subprocess;
  id: string;
  log: string;
}

/** Starts marked mpi runs in a temporary folder; `afterAll` kills what is left and removes the folder. */
export interface MpiRuns {
  /** The temporary folder (job files, logs; a test may put checkpoint folders here). */
  root: string;
  /** Writes `job` to a file and starts `train --config <it> --launcher mpi --world-size 2`, with `env` added. */
  start(job: object, env?: Record<string, string>): MpiRun;
}

/** An {@link MpiRuns} whose folder name starts with `prefix`. Call at a test file's top level. */
export function mpiRuns(prefix: string): MpiRuns {
  const root = mkdtempSync(join(tmpdir(), prefix));
  const started: string[] = [];
  afterAll(() => {
    for (const id of started) for (const p of marked(id)) signal(p, "SIGKILL");
    rmSync(root, { recursive: true, force: true });
  });
  let n = 0;
  return {
    root,
    start(job, env = {}) {
      const file = join(root, `job${n}.json`);
      writeFileSync(file, JSON.stringify(job));
      const id = `${process.pid}-${n}`;
      const log = join(root, `log${n++}.txt`);
      started.push(id);
      const proc = Bun.spawn([process.execPath, TRAIN, "--config", file, "--launcher", "mpi", "--world-size", "2"], {
        stdin: "ignore", stdout: Bun.file(log), stderr: Bun.file(log), env: { ...process.env, CI: "1", ZEROMOE_TEST_RUN: id, ...env },
      });
      return { proc, id, log };
    },
  };
}
