/**
 * The model behind `--from` of `bun run generate` and `bun run eval`, loaded whole on one backend
 * for inference (f32 parameters, no engine), with its tokenizer:
 *
 * - a ZeroMoE checkpoint (a root with `latest`, or a tag directory with manifest.json): the model
 *   config and the job come from the manifest; the values are each unit's fp32 master copy under
 *   mixed precision, else its parameters (as `zero-to-fp32` writes them), read from whichever rank
 *   files hold them (any world size, ZeRO stage or expert placement);
 * - a Hugging Face directory (config.json with model.safetensors or a sharded index);
 * - one `.safetensors` file (e.g. the fp32 export of `zero-to-fp32`): its model config is
 *   `--config` (a job file, or a config.json), else config.json beside it, else the manifest of the
 *   checkpoint named in its `zeromoe.source` metadata (written by zero-to-fp32).
 *
 * Tokenizer, first that applies: `--tokenizer` ("byte", "gpt2" or a tokenizer.json path); a
 * tokenizer.json beside the weights; the job's `data.tokenizer` (checkpoint, job file); else
 * "byte" (said in the log line).
 *
 * Bad input throws {@link UsageError} (or the ConfigError / CheckpointError / SafetensorsError /
 * DataError of the readers), all one-line messages naming the file: the CLIs exit 2 on them.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import type { BackendKind } from "@zeromoe/kernels";
import { CheckpointError } from "../checkpoint/errors.ts";
import { loadStateDict } from "../checkpoint/hf-load.ts";
import { checkHubShapes, HubCheckpoint, planHubLoad } from "../checkpoint/hub-dir.ts";
import { applyManifestBuffers } from "../checkpoint/manifest-buffers.ts";
import { locateCheckpoint, readManifest, type CheckpointManifest } from "../checkpoint/manifest.ts";
import { manifestModelConfig } from "../checkpoint/manifest-model.ts";
import { openLocatedCheckpoint } from "../checkpoint/consolidate.ts";
import { checkManifestParams } from "../checkpoint/manifest-params.ts";
import { SafetensorsError, SafetensorsReader } from "../checkpoint/safetensors.ts";
import { ShardSource } from "../checkpoint/shard-source.ts";
import { CONFIG_JSON_LIMITS } from "../config/json-bounds.ts";
import { ConfigError, parseJsonConfig, resolveJobConfig, resolveModelConfig, type JobConfig, type ModelConfig } from "../config/index.ts";
import { DataError } from "../data/sources.ts";
import { createTokenizer, type Tokenizer } from "../data/tokenizer.ts";
import { tokenizerJsonPath } from "../data/hf-tokenizer.ts";
import { createModel } from "../engine/model-factory.ts";
import type { CausalDecoder } from "../models/llama.ts";
import type { StateDict } from "../nn/state-dict.ts";
import { writeParam } from "../nn/state-dict.ts";
import { destroyBackend, probeShapeOf, selectTrainBackend } from "../train/backend.ts";
import { backendMemoryLimits, gb, readHostAvailableMemory, type MemoryLimits } from "../train/memory-check.ts";
import { largestUnit } from "../train/memory-estimate.ts";
import { countParameters } from "../config/param-count.ts";
import { pathForMessage, quoteUntrusted } from "../config/quote-untrusted.ts";

/** A command-line mistake (missing/unknown option, a path that is not a model): exit 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** True for the errors of bad input that the inference CLIs report in one line with exit 2. */
export function isInputError(e: unknown): e is Error {
  return e instanceof UsageError || e instanceof ConfigError || e instanceof CheckpointError || e instanceof SafetensorsError || e instanceof DataError;
}

/** Print an inference CLI's error and return its exit status: bad input ({@link isInputError}) is
 * one line and 2; anything else is a failure, with its stack, and 1. */
export function reportCliError(e: unknown): number {
  if (isInputError(e)) {
    console.error(`error: ${e.message}`);
    return 2;
  }
  console.error(`error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  return 1;
}

/** What {@link loadInferenceModel} returns. The caller destroys `model` and the backend. */
export interface InferenceModel {
  model: CausalDecoder;
  config: ModelConfig;
  /** The training job when known (checkpoint manifest or a job file), else null. */
  job: JobConfig | null;
  tokenizer: Tokenizer;
  /** Where the tokenizer came from, for the log. */
  tokenizerSource: string;
  kind: "checkpoint" | "hf-dir" | "safetensors";
  /** The backend's line (chosen backend and why). */
  backendLine: string;
  /** Lines for the log, e.g. checkpoint tensors the model does not use (as Transformers warns). */
  warnings: string[];
}

/** Options of {@link loadInferenceModel}. */
export interface InferenceModelOptions {
  from: string;
  backend: BackendKind;
  /** `--tokenizer`. */
  tokenizer?: string;
  /** `--config`: a job file or a Hugging Face config.json (for a lone .safetensors file). */
  config?: string;
  /** Tokens per forward, for `auto`'s speed probe (1 for generation). */
  probeTokens: number;
}

function readJsonObject(path: string, what: string): Record<string, unknown> {
  if (!existsSync(path)) throw new UsageError(`${what}: ${pathForMessage(path)} does not exist`);
  // before reading: a directory fails with EISDIR, a FIFO blocks until a writer comes
  const st = statSync(path);
  if (!st.isFile()) throw new UsageError(`${what}: ${pathForMessage(path)}: not a regular file (${st.isDirectory() ? "a directory" : st.isFIFO() ? "a FIFO" : "a device or socket"})`);
  if (st.size > CONFIG_JSON_LIMITS.maxText) throw new UsageError(`${what}: ${pathForMessage(path)}: ${st.size} bytes is over the ${CONFIG_JSON_LIMITS.maxText}-byte limit of a config file`);
  const v = parseJsonConfig(readFileSync(path, "utf8"), path);
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new UsageError(`${what}: ${pathForMessage(path)} is not a JSON object`);
  return v as Record<string, unknown>;
}

/** A model config (and the job, when it is one) from a job file or a Hugging Face config.json. */
function configFromFile(path: string, what: string): { model: ModelConfig; job: JobConfig | null } {
  const raw = readJsonObject(path, what);
  if ("model" in raw) {
    const job = resolveJobConfig(raw, { source: path }).config;
    return { model: job.model, job };
  }
  try {
    return { model: resolveModelConfig(raw, "model").config, job: null };
  } catch (e) {
    if (e instanceof ConfigError) throw new ConfigError(e.issues.map((i) => ({ ...i, source: path })), `invalid model config ${pathForMessage(path)}`);
    throw e;
  }
}

/** The checkpoint manifest a zero-to-fp32 file names in its `zeromoe.source` metadata, or null. */
function sourceManifest(file: string): CheckpointManifest | null {
  let src: string | undefined;
  const r = SafetensorsReader.open(file);
  try {
    src = r.header.metadata?.["zeromoe.source"];
  } finally {
    r.close();
  }
  if (!src) return null;
  for (const dir of isAbsolute(src) ? [src] : [resolve(src), resolve(dirname(file), src)]) {
    if (existsSync(join(dir, "manifest.json"))) return readManifest(dir);
  }
  return null;
}

/** Copy a checkpoint's fp32 values (master copy, else parameters) into `model`, unit by unit; the
 * manifest's parameters were matched with the model's first (checkManifestParams); `src` holds
 * the tag's rank files open (the caller closes it).
 * @throws CheckpointError for a damaged checkpoint. */
function loadFromCheckpoint(model: CausalDecoder, tagDir: string, m: CheckpointManifest, src: ShardSource): string[] {
  const state = m.param_dtype === "f32" ? "params" : "master";
  // names and shapes were checked against the model before it was built (checkManifestParams)
  for (const u of m.units) {
    const full = src.readF32(u.name, state, 0, u.numel);
    for (const p of u.params) {
      const param = model.param(p.name);
      writeParam(param, { dtype: "f32", shape: [...p.shape], data: full.subarray(p.offset, p.offset + param.numel) }, 0, tagDir);
    }
  }
  // the model's buffers (DeepSeek-V3's e_score_correction_bias) from plugins.model_buffers
  const unrecorded = applyManifestBuffers(model.buffers(), m.plugins, join(tagDir, "manifest.json"));
  return unrecorded.length > 0 ? [`${join(tagDir, "manifest.json")}: records no plugins.model_buffers for ${unrecorded.slice(0, 3).join(", ")}${unrecorded.length > 3 ? ` (+${unrecorded.length - 3} more)` : ""}; they keep their initial values (zeros)`] : [];
}

/**
 * Up-front memory check: the model is built whole in f32 on one backend, so its parameters need 4
 * bytes each (config/param-count.ts) in the backend's memory, and its largest unit
 * (train/memory-estimate.ts) one buffer of 4 bytes per element — checked against the backend's
 * limits (train/memory-check.ts) before anything is allocated, as training checks its model states.
 * Activations and the KV cache come on top.
 * @throws UsageError naming `from`, the bytes needed and the limit (a config.json with
 *   hidden_size 1e12 died in "cpu alloc … Out of memory" with a stack).
 */
export function checkInferenceFits(config: ModelConfig, limits: MemoryLimits, from: string): void {
  const total = countParameters(config).total;
  const shape = `${config.model_type}: hidden_size ${config.hidden_size}, num_hidden_layers ${config.num_hidden_layers}, vocab_size ${config.vocab_size}, intermediate_size ${config.intermediate_size}`;
  if (limits.host !== null && 4 * total > limits.host.bytes) {
    throw new UsageError(`--from ${pathForMessage(from)}: the model's f32 parameters need ${gb(4 * total)} (${(total / 1e9).toFixed(2)}e9 parameters; ${shape}) but the ${limits.backend} backend has ${gb(limits.host.bytes)} of host memory available (${limits.host.source}); generate and eval build the whole model on one device`);
  }
  const unit = largestUnit(config);
  if (4 * unit.numel > limits.maxBufferBytes) {
    throw new UsageError(`--from ${pathForMessage(from)}: the model's f32 parameters need ${gb(4 * unit.numel)} in one buffer for unit ${unit.name} (${shape}) but the ${limits.backend} backend's largest buffer is ${gb(limits.maxBufferBytes)} (${limits.maxBufferSource})`);
  }
}

/**
 * Load Hugging Face weights (a directory, index or `.safetensors` file) into `model`, reading only
 * what it uses: every header first (hub-dir.ts HubCheckpoint: shards exist, the index agrees with
 * them), every parameter matched in either weight layout with its shape checked (planHubLoad: all
 * missing tensors and shape mismatches at once), then only the matched tensors are read — a stored
 * tensor the model does not use is never read (a 10 GiB one died in "RangeError: Out of memory").
 * @returns warnings (unused tensors, as Transformers warns "Some weights … were not used").
 * @throws SafetensorsError naming the file and tensors.
 */
function loadHubWeights(model: CausalDecoder, from: string, config: ModelConfig): string[] {
  const hub = HubCheckpoint.open(from);
  const used = new Set<string>();
  let unexpected: string[];
  try {
    const buffers = [...model.buffers().keys()];
    const plan = planHubLoad(hub, model.parameters().map((p) => ({ name: p.name, shape: p.shape })), config.tie_word_embeddings, buffers);
    for (const s of plan.sources.values()) used.add(s.tensor);
    for (const b of buffers) if (hub.tensors.has(b)) used.add(b);
    unexpected = plan.unexpected;
  } finally {
    hub.close();
  }
  model.loadStateDict(loadStateDict(from, { filter: (n) => used.has(n) }) as unknown as StateDict, { strict: false });
  const n = unexpected.length;
  if (n === 0) return [];
  const names = unexpected.slice(0, 20).map((t) => quoteUntrusted(t)).join(", ") + (n > 20 ? ` … and ${n - 20} more` : "");
  return [`${pathForMessage(from)}: ${n} tensor${n === 1 ? "" : "s"} of the checkpoint ${n === 1 ? "is" : "are"} not used by the ${config.model_type} model: ${names}`];
}

/**
 * Load the model `opts.from` names, on the backend `opts.backend` chooses, with its tokenizer
 * (module comment).
 * @throws UsageError / ConfigError / CheckpointError / SafetensorsError / DataError for bad input.
 */
export async function loadInferenceModel(opts: InferenceModelOptions): Promise<InferenceModel> {
  // a checkpoint's rank files are opened with its manifest and stay open until its values are
  // copied (a job pruning the tag meanwhile does not affect the read), closed on every path
  const opened: ShardSource[] = [];
  try {
    return await loadInferenceModelFrom(opts, opened);
  } finally {
    for (const src of opened) src.close();
  }
}

/** {@link loadInferenceModel}; a checkpoint's ShardSource is pushed to `opened` for the caller to close. */
async function loadInferenceModelFrom(opts: InferenceModelOptions, opened: ShardSource[]): Promise<InferenceModel> {
  const from = opts.from;
  if (!existsSync(from)) throw new UsageError(`--from: ${pathForMessage(from)} does not exist (expected a ZeroMoE checkpoint directory, a Hugging Face model directory or a .safetensors file)`);
  let kind: InferenceModel["kind"];
  let config: ModelConfig;
  let job: JobConfig | null = null;
  let ckpt: { tagDir: string; manifest: CheckpointManifest; src: ShardSource } | null = null;
  const isDir = statSync(from).isDirectory();
  if (isDir && (existsSync(join(from, "manifest.json")) || existsSync(join(from, "latest")))) {
    kind = "checkpoint";
    // a tag pruned by a saving job's keep_last between locating and opening is said as such
    const loc = locateCheckpoint(from);
    const { manifest, src } = openLocatedCheckpoint(loc);
    opened.push(src);
    ckpt = { tagDir: loc.tagDir, manifest, src };
    job = manifest.config;
    config = manifestModelConfig(manifest, join(loc.tagDir, "manifest.json"));
  } else if (isDir) {
    if (!existsSync(join(from, "config.json"))) throw new UsageError(`--from: ${pathForMessage(from)} is neither a ZeroMoE checkpoint (manifest.json or latest) nor a Hugging Face model directory (config.json)`);
    kind = "hf-dir";
    ({ model: config } = configFromFile(join(from, "config.json"), "--from"));
  } else if (from.endsWith(".safetensors")) {
    kind = "safetensors";
    if (opts.config !== undefined) ({ model: config, job } = configFromFile(opts.config, "--config"));
    else if (existsSync(join(dirname(from), "config.json"))) ({ model: config } = configFromFile(join(dirname(from), "config.json"), "--from"));
    else {
      const m = sourceManifest(from);
      if (!m) throw new UsageError(`--from: ${pathForMessage(from)} has no model config: pass --config (a job file or config.json), or put config.json beside it`);
      config = m.config.model;
      job = m.config;
    }
  } else {
    throw new UsageError(`--from: ${pathForMessage(from)} is not a directory or a .safetensors file`);
  }
  // --config with a checkpoint or directory: a job file supplies data settings (tokenizer, dataset)
  if (opts.config !== undefined && kind !== "safetensors") job = configFromFile(opts.config, "--config").job ?? job;

  // tokenizer first: a bad --tokenizer fails before the backend starts
  let tokenizerName: string;
  let tokenizerSource: string;
  const weightsDir = isDir ? from : dirname(from);
  if (opts.tokenizer !== undefined) {
    tokenizerName = opts.tokenizer;
    tokenizerSource = "--tokenizer";
  } else if (kind !== "checkpoint" && tokenizerJsonPath(join(weightsDir, "tokenizer.json")) !== null) {
    tokenizerName = weightsDir;
    tokenizerSource = "tokenizer.json beside the weights";
  } else if (job) {
    // a checkpoint's job comes from its manifest: its tokenizer is checked before it is used
    const t = (job.data as { tokenizer?: unknown } | undefined)?.tokenizer;
    if (typeof t !== "string" || t === "") {
      const what = `field config.data.tokenizer: expected "byte", "gpt2" or a tokenizer.json path (a string), got ${quoteUntrusted(String(JSON.stringify(t) ?? t))}`;
      if (ckpt) throw new CheckpointError(join(ckpt.tagDir, "manifest.json"), what);
      throw new UsageError(`--config: ${what}`);
    }
    tokenizerName = t;
    tokenizerSource = "the job's data.tokenizer";
  } else {
    tokenizerName = "byte";
    tokenizerSource = "default (pass --tokenizer for another)";
  }
  const tokenizer = createTokenizer(tokenizerName);
  if (tokenizer.vocabSize > config.vocab_size) {
    // given on the command line, "pass --tokenizer" read as a request for what was just passed
    const fix = tokenizerSource === "--tokenizer"
      ? `this model cannot take it: use the tokenizer the model was trained with${job ? ` (its job's data.tokenizer is ${quoteUntrusted(String(job.data.tokenizer))})` : ""}, whose ids fit its vocabulary`
      : "pass --tokenizer with the model's own tokenizer (byte, gpt2 or a tokenizer.json) whose ids fit its vocabulary";
    throw new UsageError(`tokenizer ${pathForMessage(tokenizer.name)} (${tokenizerSource}) has ${tokenizer.vocabSize} ids but the model's vocab_size is ${config.vocab_size}; ${fix}`);
  }

  const { backend, reason } = await selectTrainBackend(opts.backend, 0, probeShapeOf(config, opts.probeTokens));
  // inference: pure cross-entropy loss (the router's aux loss is a training term)
  const inferenceConfig = { ...config, output_router_logits: false } as ModelConfig;
  let model: CausalDecoder | null = null;
  const warnings: string[] = [];
  try {
    checkInferenceFits(config, backendMemoryLimits(backend, readHostAvailableMemory()), from);
    // Hugging Face weights: their headers must match the config's parameter shapes before the
    // model is built (a config.json claiming a larger model allocated it first)
    // (a checkpoint's manifest: its parameter list against the model of its own config)
    const shapes = createModel(backend, inferenceConfig, { dtype: "f32", seed: 0, allocate: false });
    try {
      const params = shapes.parameters().map((p) => ({ name: p.name, shape: p.shape }));
      if (ckpt) checkManifestParams(ckpt.manifest, join(ckpt.tagDir, "manifest.json"), params, config.model_type);
      else checkHubShapes(from, params, config.tie_word_embeddings, [...shapes.buffers().keys()]);
    } finally {
      shapes.destroy();
    }
    model = createModel(backend, inferenceConfig, { dtype: "f32", seed: 0 });
    if (ckpt) warnings.push(...loadFromCheckpoint(model, ckpt.tagDir, ckpt.manifest, ckpt.src));
    else warnings.push(...loadHubWeights(model, from, config));
  } catch (e) {
    model?.destroy();
    destroyBackend(backend);
    const msg = e instanceof Error ? e.message : "";
    if (!isInputError(e) && msg.startsWith("loadStateDict:")) throw new SafetensorsError(from, msg.replace(/^loadStateDict: /, ""));
    throw e;
  }
  return { model, config, job, tokenizer, tokenizerSource: `${pathForMessage(tokenizer.name)} (${tokenizerSource})`, kind, backendLine: `${backend.info.name} on "${backend.info.adapter}" (${reason})`, warnings };
}
