/**
 * `--dump-batches DIR`: every rank writes the token windows it trains on, step by step, exactly as
 * the engine receives them, so that another implementation (core/bench/hf_reference.py, PyTorch)
 * can train on the same batches and its losses can be compared step for step.
 *
 * Layout of DIR (docs/summary.md "Batch dumps"):
 * - `batches.json` (world rank 0, written before step 1): `{"format": "zeromoe-batches",
 *   "version": 1, "world_size", "micro_batches" (gradient_accumulation_steps), "batch"
 *   (train_micro_batch_size_per_gpu), "seq_len", "vocab_size", "start_step", "steps",
 *   "file_pattern": "step-{step:06d}.rank-{rank:05d}.safetensors", "labels": "...", "job": the
 *   resolved job, every default filled in}`.
 * - one safetensors file per step and rank, `step-000001.rank-00000.safetensors`, holding
 *   `input_ids` and `labels`, both I32 `[micro_batches, batch, seq_len]` in the order the engine
 *   runs the micro-batches, plus `__metadata__` {step, rank, world_size}. Labels are unshifted,
 *   as Hugging Face's `labels` argument: the model scores position t against labels[t + 1]
 *   (−100 = ignored).
 * A step's global batch is the concatenation over ranks 0…world_size−1 of their micro-batches;
 * each micro-batch's loss is the mean over its own valid targets, and the step's gradient is the
 * mean of the micro-batch gradients over all ranks' micro-batches (engine.ts `trainBatch`).
 *
 * Bounded: the whole dump (all steps, all ranks) must stay under {@link BATCH_DUMP_MAX_BYTES};
 * a non-empty DIR is refused, so a dump never mixes two runs.
 */
import { accessSync, constants, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { JobConfig } from "../config/types.ts";
import { SafetensorsWriter } from "../checkpoint/safetensors.ts";

/** Largest dump accepted, bytes over all steps and ranks (ids and labels, 8 bytes per token). */
export const BATCH_DUMP_MAX_BYTES = 16 * 2 ** 30;

/** The manifest's `format` value. */
export const BATCH_DUMP_FORMAT = "zeromoe-batches";

/** File name of step `step`'s batches of rank `rank` inside a dump directory. */
export function batchDumpFile(step: number, rank: number): string {
  return `step-${String(step).padStart(6, "0")}.rank-${String(rank).padStart(5, "0")}.safetensors`;
}

/** What `batches.json` holds (module comment). */
export interface BatchDumpManifest {
  format: typeof BATCH_DUMP_FORMAT;
  version: 1;
  world_size: number;
  micro_batches: number;
  batch: number;
  seq_len: number;
  vocab_size: number;
  start_step: number;
  steps: number;
  file_pattern: string;
  labels: string;
  /** The resolved job (every default filled in): the optimizer, scheduler, clipping, precision,
   * MoE and model settings a reference implementation must use. */
  job: JobConfig;
}

/** Bytes the dump of `config` from step `startStep` + 1 to `config.steps` writes (tensor data). */
export function batchDumpBytes(config: JobConfig, startStep = 0): number {
  const steps = Math.max(0, config.steps - startStep);
  return steps * config.world_size * config.gradient_accumulation_steps * config.train_micro_batch_size_per_gpu * config.data.seq_len * 8;
}

/**
 * Why `dir` cannot be a new output folder, or null: an existing file, a non-empty folder (a dump
 * or a weights folder never mixes two runs), or a folder that cannot be created. Creates `dir`
 * when missing (checked before any rank starts).
 */
export function newOutputDirProblem(dir: string): string | null {
  const abs = resolve(dir);
  if (existsSync(abs)) {
    if (!statSync(abs).isDirectory()) return `${abs} exists and is not a directory`;
    const n = readdirSync(abs).length;
    if (n > 0) return `${abs} is not empty (${n} entr${n === 1 ? "y" : "ies"}); give a new or empty directory so that it never mixes two runs`;
  }
  try {
    mkdirSync(abs, { recursive: true });
    accessSync(abs, constants.W_OK);
  } catch (e) {
    return `cannot create or write directory ${abs} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
  }
  return null;
}

/**
 * Why `dir` cannot take the dump of `config`'s steps, or null: {@link newOutputDirProblem}, or a
 * dump over {@link BATCH_DUMP_MAX_BYTES} (counted from step 1: a resumed run writes less).
 */
export function batchDumpProblem(dir: string, config: JobConfig): string | null {
  const bytes = batchDumpBytes(config);
  if (bytes > BATCH_DUMP_MAX_BYTES) {
    return `the dump would hold ${(bytes / 2 ** 30).toFixed(1)} GiB (${config.steps} steps × world_size ${config.world_size} × ${config.gradient_accumulation_steps} micro-batches × ${config.train_micro_batch_size_per_gpu} × ${config.data.seq_len} tokens × 8 bytes), over the ${BATCH_DUMP_MAX_BYTES / 2 ** 30} GiB limit; dump fewer steps (--steps)`;
  }
  return newOutputDirProblem(dir);
}

/** One micro-batch as the engine trains it (engine.ts `TrainMicroBatch`). */
export interface DumpedMicroBatch {
  inputIds: Int32Array;
  labels: Int32Array;
  batch: number;
  seq: number;
}

/** Writes one rank's batches into a dump directory (module comment). */
export class BatchDumper {
  readonly dir: string;
  readonly rank: number;
  readonly worldSize: number;
  private readonly micro: number;
  private readonly accum: number;
  private readonly seq: number;

  /** @param dir the dump directory ({@link batchDumpProblem} checked it); world rank 0 writes
   *   `batches.json` now. */
  constructor(dir: string, config: JobConfig, rank: number, startStep = 0) {
    this.dir = resolve(dir);
    this.rank = rank;
    this.worldSize = config.world_size;
    this.micro = config.train_micro_batch_size_per_gpu;
    this.accum = config.gradient_accumulation_steps;
    this.seq = config.data.seq_len;
    mkdirSync(this.dir, { recursive: true });
    if (rank === 0) {
      const m: BatchDumpManifest = {
        format: BATCH_DUMP_FORMAT,
        version: 1,
        world_size: config.world_size,
        micro_batches: this.accum,
        batch: this.micro,
        seq_len: this.seq,
        vocab_size: config.model.vocab_size,
        start_step: startStep,
        steps: config.steps,
        file_pattern: "step-{step:06d}.rank-{rank:05d}.safetensors",
        labels: "unshifted (Hugging Face labels): position t is scored against labels[t+1]; -100 = ignored",
        job: config,
      };
      writeFileSync(join(this.dir, "batches.json"), JSON.stringify(m, null, 2) + "\n");
    }
  }

  /**
   * Write step `step`'s micro-batches of this rank.
   * @throws Error when the micro-batches do not have the job's geometry (a bug: the dump must be
   *   what was trained); SafetensorsError / fs errors from the write.
   */
  write(step: number, micros: readonly DumpedMicroBatch[]): void {
    const n = this.micro * this.seq;
    if (micros.length !== this.accum) throw new Error(`batch dump: step ${step} has ${micros.length} micro-batches, gradient_accumulation_steps is ${this.accum}`);
    const ids = new Int32Array(this.accum * n);
    const labels = new Int32Array(this.accum * n);
    micros.forEach((m, i) => {
      if (m.batch !== this.micro || m.seq !== this.seq || m.inputIds.length !== n || m.labels.length !== n) {
        throw new Error(`batch dump: step ${step} micro-batch ${i} is ${m.batch} × ${m.seq} (${m.inputIds.length} ids, ${m.labels.length} labels), expected ${this.micro} × ${this.seq}`);
      }
      ids.set(m.inputIds, i * n);
      labels.set(m.labels, i * n);
    });
    const shape = [this.accum, this.micro, this.seq];
    const w = SafetensorsWriter.create(join(this.dir, batchDumpFile(step, this.rank)), [
      { name: "input_ids", dtype: "I32", shape },
      { name: "labels", dtype: "I32", shape },
    ], { step: String(step), rank: String(this.rank), world_size: String(this.worldSize) });
    try {
      w.writeTensor("input_ids", ids);
      w.writeTensor("labels", labels);
      w.finish();
    } catch (e) {
      w.abort();
      throw e;
    }
  }
}
