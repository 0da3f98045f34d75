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
 *       [--steps 3] [--warmup 1] [--precision fp32,bf16,fp16] [--tensor-cores auto|on|off]
 *       [--micro M] [--seq S] [--json out.json]
 *
 * Precisions: `fp32`; `bf16` (bf16.enabled: bf16 parameters/gradients, fp32 master weights, no loss
 * scaling); `fp16` (fp16.enabled: f16 parameters/gradients, fp32 master weights, DeepSpeed's dynamic
 * loss scaling from 2^16). Several precisions run one after the other; then a second table compares
 * each non-fp32 run's losses with the fp32 run's, step by step (same seed, data and initial weights).
 * bf16/fp16 runs on webgpu use the tensor cores where the library offers them (ZEROMOE_WGPU=coop on a
 * GPU with cooperative matrices; core/src/train/backend.ts `tensorCoresRequest`), unless
 * `--tensor-cores off` (`on`: fail where unavailable); the `tensor cores` column says which ran and why.
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
import { TENSOR_CORES_ENV, tensorCoresRequest } from "../src/train/backend.ts";

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
  precision: Precision;
  adapter: string;
  /** "on (…)" / "off (why)" for webgpu bf16/fp16 rows (the backend's tensorCoresStatus), else "-". */
  tensorCores: string;
  params: number;
  micro: number;
  seqLen: number;
  /** True when --micro/--seq changed the fixed shape. */
  shapeOverridden: boolean;
  steps: number;
  msPerStep: number;
  tokensPerSecond: number;
  finalLoss: number;
  /** Loss of every step, warm-up included (empty when the backend could not run). */
  losses: number[];
  /** Why the backend could not run (then the figures are NaN). */
  error?: string;
}

/** Training precision of a benchmark run (see the module comment). */
export type Precision = "fp32" | "bf16" | "fp16";

/** Options of {@link benchTrain}. */
export interface TrainBenchOptions {
  models: string[];
  backends: ("webgpu" | "cpu")[];
  steps: number;
  warmup: number;
  /** Precisions to run, in order (each model × precision × backend is one row). */
  precisions: Precision[];
  /** ZEROMOE_TENSOR_CORES for the bf16/fp16 runs (default: the environment's, else auto). */
  tensorCores?: "auto" | "on" | "off";
  micro?: number;
  seq?: number;
}

/** The job file of one benchmark run. */
export function benchJob(name: string, backend: "webgpu" | "cpu", precision: Precision, o: Omit<TrainBenchOptions, "precisions">): Record<string, unknown> {
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
    bf16: { enabled: precision === "bf16" },
    fp16: { enabled: precision === "fp16" },
    zero_optimization: { stage: 0 },
    steps_per_print: 1_000_000,
  };
}

/** The tensor-core part of a backend reason line ("on (…)" / "off (…)"), or "-" when it has none. */
export function tensorCoresOfReason(reason: string): string {
  const i = reason.lastIndexOf("; tensor cores ");
  return i < 0 ? "-" : reason.slice(i + "; tensor cores ".length);
}

/** Run every model × precision × backend of `o` (sequentially) and return the rows. */
export async function benchTrain(o: TrainBenchOptions): Promise<TrainBenchRow[]> {
  const rows: TrainBenchRow[] = [];
  const envBefore = process.env[TENSOR_CORES_ENV];
  if (o.tensorCores) process.env[TENSOR_CORES_ENV] = o.tensorCores;
  try {
    for (const name of o.models) for (const precision of o.precisions) for (const backend of o.backends) rows.push(await benchOne(name, backend, precision, o));
  } finally {
    if (envBefore === undefined) delete process.env[TENSOR_CORES_ENV];
    else process.env[TENSOR_CORES_ENV] = envBefore;
  }
  return rows;
}

/** One model × backend × precision row (a backend that cannot start gives a row saying why). */
async function benchOne(name: string, backend: "webgpu" | "cpu", precision: Precision, o: TrainBenchOptions): Promise<TrainBenchRow> {
  const { config } = resolveJobConfig(benchJob(name, backend, precision, o), { source: `bench train ${name}` });
  const base = {
    model: name,
    backend,
    precision,
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
    return {
      ...base,
      adapter: summary.backend.adapter,
      tensorCores: tensorCoresOfReason(reports[0]!.backend.reason),
      params: summary.num_parameters,
      msPerStep: (1000 * total) / secs.length,
      tokensPerSecond: tokens / total,
      finalLoss: summary.final_loss ?? NaN,
      losses: summary.losses,
    };
  } catch (e) {
    const msg = e instanceof LaunchError ? (e.failures.find((f) => f.rank === e.rank)?.message ?? e.message) : (e as Error).message;
    if (!/backend "webgpu" requested but unavailable/.test(msg)) throw e;
    return { ...base, adapter: "-", tensorCores: "-", params: NaN, msPerStep: NaN, tokensPerSecond: NaN, finalLoss: NaN, losses: [], error: msg };
  }
}

/** The rows as a Markdown table, with the webgpu/cpu ratio per model where both ran. */
export function formatTrainBench(rows: readonly TrainBenchRow[]): string {
  const lines = [
    "| model | backend | precision | adapter | tensor cores | parameters | micro × seq | ms/step | tokens/s | webgpu/cpu | loss after |",
    "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const r of rows) {
    if (r.error) {
      lines.push(`| ${r.model} | ${r.backend} | ${r.precision} | unavailable: ${r.error.replace(/\|/g, "/")} | | | | | | | |`);
      continue;
    }
    const cpu = rows.find((x) => x.model === r.model && x.precision === r.precision && x.backend === "cpu" && !x.error);
    const ratio = r.backend === "webgpu" && cpu ? `${(r.tokensPerSecond / cpu.tokensPerSecond).toFixed(2)}×` : "";
    const shape = `${r.micro} × ${r.seqLen}${r.shapeOverridden ? " (overridden)" : ""}`;
    lines.push(`| ${r.model} | ${r.backend} | ${r.precision} | ${r.adapter} | ${r.tensorCores.replace(/\|/g, "/")} | ${r.params.toLocaleString("en-US")} | ${shape} | ${r.msPerStep.toFixed(1)} | ${Math.round(r.tokensPerSecond)} | ${ratio} | ${r.finalLoss.toFixed(4)} |`);
  }
  return lines.join("\n");
}

/** Step-by-step comparison of each bf16/fp16 row's losses with the fp32 row of the same model and
 * backend: max |Δ| and max |Δ|/loss over the common steps, and the last step's losses. Rows without
 * an fp32 partner are left out; "" when there is nothing to compare. */
export function formatLossTracking(rows: readonly TrainBenchRow[]): string {
  const lines: string[] = [];
  for (const r of rows) {
    if (r.precision === "fp32" || r.error) continue;
    const ref = rows.find((x) => x.model === r.model && x.backend === r.backend && x.precision === "fp32" && !x.error);
    if (!ref) continue;
    const n = Math.min(r.losses.length, ref.losses.length);
    let maxAbs = 0, maxRel = 0;
    for (let i = 0; i < n; i++) {
      const d = Math.abs(r.losses[i]! - ref.losses[i]!);
      maxAbs = Math.max(maxAbs, d);
      maxRel = Math.max(maxRel, d / Math.abs(ref.losses[i]!));
    }
    lines.push(`| ${r.model} | ${r.backend} | ${r.precision} vs fp32 | ${n} | ${maxAbs.toExponential(2)} | ${(100 * maxRel).toFixed(3)} % | ${ref.losses[n - 1]?.toFixed(4) ?? "-"} | ${r.losses[n - 1]?.toFixed(4) ?? "-"} |`);
  }
  if (lines.length === 0) return "";
  return ["| model | backend | runs | steps | max abs Δloss | max rel Δloss | fp32 last | this last |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |", ...lines].join("\n");
}

export const USAGE = `usage: bun run bench train [--models default,llama-small,mixtral-small,mixtral-med] [--backends webgpu,cpu]
       [--steps 3] [--warmup 1] [--precision fp32,bf16,fp16] [--tensor-cores auto|on|off] [--micro M] [--seq S] [--json out.json]`;

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
      "tensor-cores": { type: "string" },
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
    precisions: [...new Set(list("precision", values.precision!, ["fp32", "bf16", "fp16"] as const))],
    ...(values["tensor-cores"] !== undefined ? { tensorCores: list("tensor-cores", values["tensor-cores"], ["auto", "on", "off"] as const)[0]! } : {}),
    micro: int("micro", values.micro, 1),
    seq: int("seq", values.seq, 2),
  };
  // a bad ZEROMOE_TENSOR_CORES is refused here, before any model is built
  if (!opts.tensorCores) tensorCoresRequest({ fp16: false, bf16: true });
  const t0 = performance.now();
  const rows = await benchTrain(opts);
  console.log(formatTrainBench(rows));
  const tracking = formatLossTracking(rows);
  if (tracking) console.log(`\nLosses against the fp32 run (same seed, data and initial weights):\n${tracking}`);
  console.log(`\n${opts.warmup} warm-up + ${opts.steps} measured steps per row; ${((performance.now() - t0) / 1000).toFixed(1)} s in all`);
  if (values.models === "default") console.log("(the fixed models: --models default,llama-small,mixtral-small; minutes per step without a GPU)");
  if (values.json) writeFileSync(values.json, JSON.stringify(rows, null, 2) + "\n");
}

if (import.meta.main) await main(process.argv.slice(2));
