/**
 * Training throughput benchmark: tokens per second of full training steps (forward, backward,
 * gradient reduction, AdamW) through the real trainer (`runTraining`: one launched rank, the
 * DataLoader on Moby Dick byte tokens, the Engine), on the WebGPU backend and the CPU backend in
 * one run, for
 *
 * - `default`: the model of the built-in job (core/src/config/default-job.ts), its seq_len and micro-batch;
 * - `llama-small`: LlamaForCausalLM, vocab 256, hidden 512, intermediate 1024, 8 layers, 8 heads
 *   (8 kv heads), seq 256, micro-batch 16;
 * - `mixtral-small`: the same with 8 experts, top-2 (MixtralForCausalLM, about 110M parameters);
 * - `mixtral-med`: MixtralForCausalLM, vocab 256, hidden 1024, intermediate 2816, 8 layers, 16 heads
 *   (8 kv heads), 8 experts top-2, seq 1024, micro-batch 8 (about 579M parameters).
 *
 * The PyTorch counterpart with the same shapes is core/bench/torch_train.py.
 *
 *   bun run bench train [--models default|llama-small|mixtral-small|mixtral-med,…] [--backends webgpu,cpu]
 *       [--steps 3] [--warmup 1] [--precision fp32|bf16] [--micro M] [--seq S] [--json out.json]
 *
 * Without `--models` only `default` runs: the fixed small models need minutes per step on a CPU or
 * a software adapter (2 cores: ~0.5 TFLOP per llama-small step); name them to run them.
 *
 * tokens/s = micro × seq × measured steps / Σ their wall times (the `warmup` first steps are run but
 * not measured: they compile pipelines and grow pools). `--micro`/`--seq` override the fixed shapes
 * (rows then say so); use them only where the fixed shapes take too long (2 CPU cores).
 * A backend that cannot start (no WebGPU adapter) gives a row saying why; other errors abort.
 */
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { DEFAULT_JOB } from "../src/config/default-job.ts";
import { resolveJobConfig } from "../src/config/resolve.ts";
import { LaunchError } from "../src/launch/launch.ts";
import { runTraining } from "../src/train/run.ts";

/** A fixed benchmark model: HF config keys plus the batch geometry. */
export interface BenchModel {
  model: Record<string, unknown>;
  seqLen: number;
  micro: number;
}

const SMALL = {
  vocab_size: 256,
  hidden_size: 512,
  intermediate_size: 1024,
  num_hidden_layers: 8,
  num_attention_heads: 8,
  num_key_value_heads: 8,
  max_position_embeddings: 256,
  rms_norm_eps: 1e-5,
  rope_theta: 10000,
  tie_word_embeddings: false,
};

/** The benchmark models by name (see the module comment). */
export const BENCH_MODELS: Readonly<Record<string, BenchModel>> = {
  default: {
    model: DEFAULT_JOB.model as Record<string, unknown>,
    seqLen: (DEFAULT_JOB.data as { seq_len: number }).seq_len,
    micro: DEFAULT_JOB.train_micro_batch_size_per_gpu as number,
  },
  "llama-small": { model: { model_type: "llama", ...SMALL }, seqLen: 256, micro: 16 },
  "mixtral-small": {
    model: { model_type: "mixtral", ...SMALL, num_local_experts: 8, num_experts_per_tok: 2, router_aux_loss_coef: 0.01, output_router_logits: true },
    seqLen: 256,
    micro: 16,
  },
  "mixtral-med": {
    model: {
      model_type: "mixtral",
      ...SMALL,
      hidden_size: 1024,
      intermediate_size: 2816,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      max_position_embeddings: 1024,
      num_local_experts: 8,
      num_experts_per_tok: 2,
      router_aux_loss_coef: 0.01,
      output_router_logits: true,
    },
    seqLen: 1024,
    micro: 8,
  },
};

/** One measured (or failed) combination. */
export interface TrainBenchRow {
  model: string;
  backend: "webgpu" | "cpu";
  precision: "fp32" | "bf16";
  adapter: string;
  params: number;
  micro: number;
  seqLen: number;
  /** True when --micro/--seq changed the fixed shape. */
  shapeOverridden: boolean;
  steps: number;
  msPerStep: number;
  tokensPerSecond: number;
  finalLoss: number;
  /** Why the backend could not run (then the figures are NaN). */
  error?: string;
}

/** Options of {@link benchTrain}. */
export interface TrainBenchOptions {
  models: string[];
  backends: ("webgpu" | "cpu")[];
  steps: number;
  warmup: number;
  precision: "fp32" | "bf16";
  micro?: number;
  seq?: number;
}

/** The job file of one benchmark run. */
export function benchJob(name: string, backend: "webgpu" | "cpu", o: TrainBenchOptions): Record<string, unknown> {
  const m = BENCH_MODELS[name];
  if (!m) throw new Error(`bench train: unknown model "${name}"; known: ${Object.keys(BENCH_MODELS).join(", ")}`);
  const seq = o.seq ?? m.seqLen;
  return {
    model: { ...m.model, max_position_embeddings: Math.max(seq, m.model.max_position_embeddings as number) },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: seq, validation_fraction: 0.01 },
    seed: 1234,
    backend,
    world_size: 1,
    steps: o.warmup + o.steps,
    eval_interval: 0,
    train_micro_batch_size_per_gpu: o.micro ?? m.micro,
    gradient_accumulation_steps: 1,
    optimizer: { type: "AdamW", params: { lr: 3e-4, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0.1 } },
    gradient_clipping: 1.0,
    bf16: { enabled: o.precision === "bf16" },
    zero_optimization: { stage: 0 },
    steps_per_print: 1_000_000,
  };
}

/** Run every model × backend of `o` (sequentially) and return the rows. */
export async function benchTrain(o: TrainBenchOptions): Promise<TrainBenchRow[]> {
  const rows: TrainBenchRow[] = [];
  for (const name of o.models) {
    for (const backend of o.backends) {
      const { config } = resolveJobConfig(benchJob(name, backend, o), { source: `bench train ${name}` });
      const base = {
        model: name,
        backend,
        precision: o.precision,
        micro: config.train_micro_batch_size_per_gpu,
        seqLen: config.data.seq_len,
        shapeOverridden: o.micro !== undefined || o.seq !== undefined,
        steps: o.steps,
      };
      try {
        const { summary, reports } = await runTraining(config, { verbose: false, tty: false });
        const secs = reports[0]!.stepSeconds.slice(o.warmup);
        const total = secs.reduce((a, b) => a + b, 0);
        const tokens = config.train_batch_size * config.data.seq_len * secs.length;
        rows.push({ ...base, adapter: summary.backend.adapter, params: summary.num_parameters, msPerStep: (1000 * total) / secs.length, tokensPerSecond: tokens / total, finalLoss: summary.final_loss ?? NaN });
      } catch (e) {
        const msg = e instanceof LaunchError ? (e.failures.find((f) => f.rank === e.rank)?.message ?? e.message) : (e as Error).message;
        if (!/backend "webgpu" requested but unavailable/.test(msg)) throw e;
        rows.push({ ...base, adapter: "-", params: NaN, msPerStep: NaN, tokensPerSecond: NaN, finalLoss: NaN, error: msg });
      }
    }
  }
  return rows;
}

/** The rows as a Markdown table, with the webgpu/cpu ratio per model where both ran. */
export function formatTrainBench(rows: readonly TrainBenchRow[]): string {
  const lines = [
    "| model | backend | precision | adapter | parameters | micro × seq | ms/step | tokens/s | webgpu/cpu | loss after |",
    "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const r of rows) {
    if (r.error) {
      lines.push(`| ${r.model} | ${r.backend} | ${r.precision} | unavailable: ${r.error.replace(/\|/g, "/")} | | | | | | |`);
      continue;
    }
    const cpu = rows.find((x) => x.model === r.model && x.backend === "cpu" && !x.error);
    const ratio = r.backend === "webgpu" && cpu ? `${(r.tokensPerSecond / cpu.tokensPerSecond).toFixed(2)}×` : "";
    const shape = `${r.micro} × ${r.seqLen}${r.shapeOverridden ? " (overridden)" : ""}`;
    lines.push(`| ${r.model} | ${r.backend} | ${r.precision} | ${r.adapter} | ${r.params.toLocaleString("en-US")} | ${shape} | ${r.msPerStep.toFixed(1)} | ${Math.round(r.tokensPerSecond)} | ${ratio} | ${r.finalLoss.toFixed(4)} |`);
  }
  return lines.join("\n");
}

const USAGE = `usage: bun run bench train [--models default,llama-small,mixtral-small,mixtral-med] [--backends webgpu,cpu]
       [--steps 3] [--warmup 1] [--precision fp32|bf16] [--micro M] [--seq S] [--json out.json]`;

function list<T extends string>(flag: string, raw: string, allowed: readonly T[]): T[] {
  const items = raw.split(",").map((s) => s.trim()).filter(Boolean);
  for (const x of items) if (!allowed.includes(x as T)) throw new Error(`--${flag}: unknown value "${x}"; expected some of ${allowed.join(", ")}\n${USAGE}`);
  if (items.length === 0) throw new Error(`--${flag}: empty list\n${USAGE}`);
  return items as T[];
}

function int(flag: string, raw: string | undefined, min: number): number | undefined {
  if (raw === undefined) return undefined;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min) throw new Error(`--${flag}: expected an integer ≥ ${min}, got ${JSON.stringify(raw)}\n${USAGE}`);
  return v;
}

/** `bun run bench train …` entry (see the module comment). */
export async function main(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      models: { type: "string", default: "default" },
      backends: { type: "string", default: "webgpu,cpu" },
      steps: { type: "string", default: "3" },
      warmup: { type: "string", default: "1" },
      precision: { type: "string", default: "fp32" },
      micro: { type: "string" },
      seq: { type: "string" },
      json: { type: "string" },
    },
  });
  const opts: TrainBenchOptions = {
    models: list("models", values.models!, Object.keys(BENCH_MODELS)),
    backends: list("backends", values.backends!, ["webgpu", "cpu"] as const),
    steps: int("steps", values.steps, 1)!,
    warmup: int("warmup", values.warmup, 0)!,
    precision: list("precision", values.precision!, ["fp32", "bf16"] as const)[0]!,
    micro: int("micro", values.micro, 1),
    seq: int("seq", values.seq, 2),
  };
  const t0 = performance.now();
  const rows = await benchTrain(opts);
  console.log(formatTrainBench(rows));
  console.log(`\n${opts.warmup} warm-up + ${opts.steps} measured steps per row; ${((performance.now() - t0) / 1000).toFixed(1)} s in all`);
  if (values.models === "default") console.log("(the fixed models: --models default,llama-small,mixtral-small; minutes per step without a GPU)");
  if (values.json) writeFileSync(values.json, JSON.stringify(rows, null, 2) + "\n");
}

if (import.meta.main) await main(process.argv.slice(2));
