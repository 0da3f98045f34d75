/**
 * Rank entry of the loss-normalisation tests: trains a job on masked micro-batches whose scored
 * label counts differ from micro-batch to micro-batch (chat data does), the same global batch at
 * every world size: the step's rows are {@link maskedRows}, rank r taking micro-batch slots
 * r, r + n, … of `micro` rows each. Returns losses, gradient norms and full parameters.
 */
import { CpuBackend } from "@zeromoe/kernels";
import type { Communicator } from "../../src/comm/communicator.ts";
import { resolveJobConfig } from "../../src/config/index.ts";
import { Engine, type TrainMicroBatch } from "../../src/engine/engine.ts";
import { pluginsForJob } from "../../src/engine/plugin-loader.ts";
import { gatherFullParams } from "../../src/testing.ts";
import { microBatch } from "../../src/testing.ts";

export const MASKED_ENTRY: string = import.meta.path;

export interface MaskedArgs {
  job: Record<string, unknown>;
  steps: number;
  /** Rows of one step's global batch. */
  rows: number;
  /** Replace these positions' input ids of every row (masked positions only) by other ids. */
  flipMasked?: boolean;
  label?: string;
}

export interface MaskedOut {
  label?: string;
  losses: number[];
  gradNorms: number[];
  params: Record<string, number[]>;
}

/** Row `r` of step `step`: ids from microBatch, labels −100 on a prefix of 1 + (r·5 mod seq−1)
 * positions (a "prompt" of varying length) and on the trailing positions after a varying answer
 * (padding); with `flip` the ids under the trailing mask are replaced (they feed no scored
 * position: causal attention). */
export function maskedRows(step: number, rows: number, seq: number, vocab: number, flip = false): { ids: Int32Array; labels: Int32Array } {
  const ids = new Int32Array(rows * seq);
  const labels = new Int32Array(rows * seq);
  for (let r = 0; r < rows; r++) {
    const mb = microBatch(step, r, 1, seq, vocab);
    const prompt = 1 + ((r * 5) % (seq - 1));
    const end = Math.min(seq, prompt + 1 + ((r * 3) % 4));
    for (let t = 0; t < seq; t++) {
      const id = t >= end && flip ? (mb.inputIds[t]! + 17) % Math.min(vocab, 256) : mb.inputIds[t]!;
      ids[r * seq + t] = id;
      labels[r * seq + t] = t < prompt || t >= end ? -100 : id;
    }
  }
  return { ids, labels };
}

async function trainMasked(comm: Communicator, args: MaskedArgs): Promise<MaskedOut> {
  const { config } = resolveJobConfig({ ...args.job, world_size: comm.worldSize });
  const be = new CpuBackend();
  const engine = await Engine.create({ config, comm, backend: be, plugins: await pluginsForJob(config), log: () => {} });
  const micro = config.train_micro_batch_size_per_gpu;
  const accum = config.gradient_accumulation_steps;
  const seq = config.data.seq_len;
  if (micro * accum * comm.worldSize !== args.rows) throw new Error(`masked-rank: micro ${micro} × accum ${accum} × world ${comm.worldSize} ≠ rows ${args.rows}`);
  const losses: number[] = [];
  const gradNorms: number[] = [];
  for (let s = 0; s < args.steps; s++) {
    const { ids, labels } = maskedRows(s, args.rows, seq, config.model.vocab_size, args.flipMasked);
    const mbs: TrainMicroBatch[] = [];
    for (let a = 0; a < accum; a++) {
      const slot = a * comm.worldSize + comm.rank;
      const sl = (x: Int32Array) => x.slice(slot * micro * seq, (slot + 1) * micro * seq);
      mbs.push({ inputIds: sl(ids), labels: sl(labels), batch: micro, seq });
    }
    const r = await engine.trainBatch(mbs);
    losses.push(r.loss);
    gradNorms.push(r.gradNorm);
  }
  const params = await gatherFullParams(engine, comm);
  engine.destroy();
  return { label: args.label, losses, gradNorms, params };
}

/** Rank entry: one job or several. */
export default async function main(comm: Communicator, _rank: number, _ws: number, args: MaskedArgs | { runs: MaskedArgs[] }): Promise<MaskedOut | MaskedOut[]> {
  if ("runs" in args) {
    const out: MaskedOut[] = [];
    for (const r of args.runs) out.push(await trainMasked(comm, r));
    return out;
  }
  return trainMasked(comm, args);
}
