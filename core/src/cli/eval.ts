/**
 * `bun run eval --from <checkpoint|hf-dir|file.safetensors> [--data DATASET] [--seq-len N]
 * [--batch-size B] [--max-batches M] [--backend auto|webgpu|cpu] [--tokenizer …] [--config FILE]`
 *
 * Mean next-token cross-entropy (nats per token) and perplexity exp(loss) of the model on:
 * - without `--data`: the training job's validation split, exactly as training evaluates it
 *   (same windows, micro-batch and `eval_batches` per rank of the job's world_size, `--max-batches`
 *   in its place; the router's aux loss is not added), so on a
 *   checkpoint it prints the run's last `val_loss` — needs the job (a checkpoint, or `--config`);
 * - with `--data` ("moby-dick", "sotu", or a .txt/.jsonl/.bin path): every window of the whole
 *   corpus (consecutive, non-overlapping, `--seq-len` tokens, default the job's `data.seq_len`
 *   or min(256, max_position_embeddings)), `--max-batches` to stop early.
 * Each window scores positions 1..seq_len−1 (labels = inputs, shifted inside the model, as in
 * training); the loss is averaged over all scored tokens. Backend choice as in training.
 *
 * Exit status: 0, 2 for bad input (one line naming the option or file), 1 otherwise.
 */
import { DataLoader } from "../data/loader.ts";
import { loadCorpus } from "../data/sources.ts";
import { fillWindow, windowCount } from "../data/windows.ts";
import type { CausalDecoder } from "../models/llama.ts";
import { noGrad } from "../tensor/index.ts";
import { destroyBackend } from "../train/backend.ts";
import { evalBatchCount } from "../train/loop.ts";
import { parseOptions } from "./inference-args.ts";
import { UsageError, loadInferenceModel, reportCliError } from "./model-source.ts";

/** Usage text. */
export const EVAL_USAGE = `usage: bun run eval --from <checkpoint-dir|hf-dir|model.safetensors> [--data moby-dick|sotu|FILE] [--seq-len N] [--batch-size B (8)] [--max-batches M] [--backend auto|webgpu|cpu] [--tokenizer byte|gpt2|PATH] [--config FILE]`;

const SPECS = {
  "--from": { kind: "string" },
  "--data": { kind: "string" },
  "--seq-len": { kind: "int", min: 2 },
  "--batch-size": { kind: "int", min: 1 },
  "--max-batches": { kind: "int", min: 1 },
  "--backend": { kind: "enum", values: ["auto", "webgpu", "cpu"] },
  "--tokenizer": { kind: "string" },
  "--config": { kind: "string" },
} as const;

/** One batch: ids [batch, seq] row-major. */
interface EvalBatch {
  ids: Int32Array;
  batch: number;
  seq: number;
  /** Chat data: labels (−100 off the assistant turns); absent: the ids. */
  labels?: Int32Array;
  /** Chat data, packed: per-token segment ids. */
  segmentIds?: Int32Array;
}

/**
 * Token-weighted mean cross-entropy of `model` over `batches` (labels = inputs unless a batch
 * carries its own, shifted inside the model): Σ loss_b·n_b / Σ n_b with n_b the scored tokens of batch b. Returns the loss and count.
 */
export async function meanLoss(model: CausalDecoder, batches: readonly EvalBatch[]): Promise<{ loss: number; tokens: number }> {
  let sum = 0;
  let tokens = 0;
  for (const b of batches) {
    const r = await noGrad(async () => {
      const out = await model.forward({ inputIds: b.ids, labels: b.labels ?? b.ids, batch: b.batch, seq: b.seq, ...(b.segmentIds ? { segmentIds: b.segmentIds } : {}) });
      const v = await out.loss!.item();
      out.logits?.dispose();
      out.loss!.dispose();
      out.auxLoss?.dispose();
      return { v, n: out.numTargets };
    });
    sum += r.v * r.n;
    tokens += r.n;
  }
  return { loss: sum / tokens, tokens };
}

/** Run with `argv` (without runtime and script); returns the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(EVAL_USAGE);
    return 0;
  }
  try {
    const o = parseOptions(argv, SPECS, EVAL_USAGE);
    if (o.from === undefined) throw new UsageError(`--from is required\n${EVAL_USAGE}`);
    const batchSize = o["batch-size"] as number | undefined;
    const src = await loadInferenceModel({ from: o.from as string, backend: (o.backend as "auto" | "webgpu" | "cpu") ?? "auto", tokenizer: o.tokenizer as string | undefined, config: o.config as string | undefined, probeTokens: (batchSize ?? 8) * ((o["seq-len"] as number | undefined) ?? 64) });
    const { model, tokenizer, job, config: c } = src;
    try {
      console.log(`model      ${c.model_type}: ${c.num_hidden_layers} layers, hidden ${c.hidden_size}, vocab ${c.vocab_size} (${src.kind} ${o.from})`);
      console.log(`backend    ${src.backendLine}`);
      console.log(`tokenizer  ${src.tokenizerSource}`);
      for (const w of src.warnings) console.error(`warning: ${w}`);
      const t0 = performance.now();
      let batches: EvalBatch[];
      let what: string;
      if (o.data === undefined) {
        if (!job) throw new UsageError(`--data is required: ${o.from} carries no training job (give --data, or --config with the job file)`);
        if (o["seq-len"] !== undefined) throw new UsageError("--seq-len applies with --data (the job's validation split uses its data.seq_len)");
        const micro = batchSize ?? job.train_micro_batch_size_per_gpu;
        const loader = await DataLoader.fromConfig(job.data, { micro, accum: 1, worldSize: 1, rank: 0, seed: job.seed, modelVocabSize: c.vocab_size });
        // training scores eval_batches micro-batches per rank (rank r takes slots r, r + W, …): the
        // first eval_batches × world_size slots, which a world-1 loader yields in order
        const W = job.world_size;
        const perRank = evalBatchCount(loader.info.validationWindows, micro, W, (o["max-batches"] as number | undefined) ?? job.eval_batches);
        batches = loader.validationBatches(perRank * W).map((b) => ({ ids: b.inputs, batch: b.micro, seq: b.seqLen, ...(b.labels ? { labels: b.labels } : {}), ...(b.segmentIds ? { segmentIds: b.segmentIds } : {}) }));
        if (batches.length === 0) throw new UsageError(`the job's validation split (${job.data.dataset}, validation_fraction ${job.data.validation_fraction}) holds fewer than ${micro} windows of ${job.data.seq_len + 1} tokens`);
        what = `${job.data.dataset} validation split (${batches.length} batches of ${micro} × ${job.data.seq_len}: ${perRank} per rank × world_size ${W}, as training evaluates)`;
      } else {
        const S = (o["seq-len"] as number | undefined) ?? job?.data.seq_len ?? Math.min(256, c.max_position_embeddings);
        if (S > c.max_position_embeddings) throw new UsageError(`--seq-len ${S} exceeds the model's max_position_embeddings ${c.max_position_embeddings}`);
        const corpus = await loadCorpus(o.data as string, tokenizer, c.vocab_size);
        const W = windowCount(corpus.tokens.length, S);
        if (W === 0) throw new UsageError(`--data ${o.data}: ${corpus.tokens.length} tokens is less than one window of ${S + 1}`);
        const B = batchSize ?? 8;
        const maxBatches = (o["max-batches"] as number | undefined) ?? Infinity;
        batches = [];
        for (let w = 0; w < W && batches.length < maxBatches; w += B) {
          const n = Math.min(B, W - w);
          const ids = new Int32Array(n * S);
          const targets = new Int32Array(n * S);
          for (let r = 0; r < n; r++) fillWindow(corpus.tokens, w + r, S, ids, targets, r);
          batches.push({ ids, batch: n, seq: S });
        }
        what = `${o.data}: ${corpus.tokens.length} tokens, ${batches.reduce((s, b) => s + b.batch, 0)} windows of ${S}`;
      }
      const { loss, tokens } = await meanLoss(model, batches);
      const s = (performance.now() - t0) / 1000;
      console.log(`data       ${what}`);
      console.log(`eval       loss ${loss.toFixed(4)} | perplexity ${Math.exp(loss).toFixed(3)} | ${tokens} tokens scored in ${s.toFixed(1)} s`);
    } finally {
      model.destroy();
      destroyBackend(model.be);
    }
    return 0;
  } catch (e) {
    return reportCliError(e);
  }
}

if (import.meta.main) process.exit(await main(process.argv.slice(2)));
