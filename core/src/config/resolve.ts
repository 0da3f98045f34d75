/**
 * Turns a parsed job file (plus an optional DeepSpeed config and CLI overrides) into a fully
 * resolved {@link JobConfig}: schema check with defaults (spec-job.ts), then the cross-field rules
 * (batch-size rule, fp16 × bf16, MoE divisibility, offload × stage, scheduler defaults taken from
 * the optimizer and `steps`, tokenizer vocabulary ≤ model vocabulary). Every problem from every
 * phase is collected and thrown as one {@link ConfigError}.
 */
import { applySetOverrides, type SetOverride } from "./set-override.ts";
import { ConfigError, type ConfigIssue, suggest } from "./errors.ts";
import { addIssue, check, isPlainObject, show, type CheckContext } from "./schema.ts";
import { CHECKPOINT_SPEC, JOB_SPEC } from "./spec-job.ts";
import { DEEPSPEED_TOP_KEYS } from "./spec-deepspeed.ts";
import { checkModelConsistency } from "./spec-model.ts";
import { isSparseModel, moeShape } from "./moe-shape.ts";
import { resolveExpertParallel } from "./resolve-expert-parallel.ts";
import { resolveBatchSizes } from "./batch.ts";
import { describeAutoFill, fillAutoAfterCheck, fillAutoBeforeCheck } from "./auto-values.ts";
import { findJsonSyntaxError } from "./json-position.ts";
import { CONFIG_JSON_LIMITS, describeValue, scanJsonBounds } from "./json-bounds.ts";
import { findDuplicateJsonKey } from "./json-duplicate-keys.ts";
import { parseHjson } from "./hjson-read.ts";
import { statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { isAbsolute, resolve } from "node:path";
import { hfTokenizerVocabSize } from "../data/hf-tokenizer.ts";
import type { JobConfig, MoeConfig, ModelConfig, ResolvedJob } from "./types.ts";

/** Vocabulary size of each tokenizer (byte: 256 byte values; gpt2: r50k_base, 50257 tokens). */
export const TOKENIZER_VOCAB_SIZE: Readonly<Record<"byte" | "gpt2", number>> = { byte: 256, gpt2: 50257 };

/** Vocabulary size of `data.tokenizer`: {@link TOKENIZER_VOCAB_SIZE} by name, else read from the
 * Hugging Face tokenizer.json it names (0 when unreadable: the data loader reports that, naming the file). */
function tokenizerVocabSize(name: string): number {
  if (name === "byte" || name === "gpt2") return TOKENIZER_VOCAB_SIZE[name];
  try {
    return hfTokenizerVocabSize(name);
  } catch {
    return 0;
  }
}

/** The datasets built in (data/sources.ts loadCorpus). */
const BUILTIN_DATASETS: readonly string[] = ["moby-dick", "sotu"];

/** Values given on the command line; they replace the job file's. */
export interface JobOverrides {
  steps?: number;
  world_size?: number;
  seed?: number;
  backend?: "auto" | "webgpu" | "cpu";
  /** Device memory budget per rank, bytes (`--max-device-memory`). */
  max_device_memory?: number;
}

/** Inputs of {@link resolveJobConfig}. */
export interface ResolveOptions {
  /** Name of the job file, used in error messages (default `<job>`). */
  source?: string;
  /** A DeepSpeed config to merge over the job's DeepSpeed keys (its own keys must all be DeepSpeed keys). */
  deepspeed?: { raw: unknown; source: string };
  overrides?: JobOverrides;
  /** `--set KEY=VALUE` overrides (set-override.ts), applied after the DeepSpeed merge. */
  sets?: readonly SetOverride[];
}

/**
 * Deep-merges `over` into `base`: objects merge key by key, anything else (arrays, scalars, null)
 * replaces. Neither input is modified.
 */
export function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] = isPlainObject(b) && isPlainObject(v) ? deepMerge(b, v) : v;
  }
  return out;
}

/**
 * Validates and resolves a job. `raw` is the parsed job JSON (an object).
 * @throws ConfigError listing every issue (each with JSON path and expectation).
 */
export function resolveJobConfig(raw: unknown, opts: ResolveOptions = {}): ResolvedJob {
  const jobSource = opts.source ?? "<job>";
  const issues: ConfigIssue[] = [];
  const origin = new Map<string, string>();
  const ctx: CheckContext = {
    issues,
    warnings: [],
    sourceOf: (path) => origin.get(path.split(/[.[]/)[0]),
  };
  if (!isPlainObject(raw)) {
    throw new ConfigError([{ path: "", message: `expected a JSON object at the top of the job file`, source: jobSource }], `invalid job ${jobSource}`);
  }
  // keys starting with "_" ("_comment", "_note") are notes, as in DeepSpeed configs that carry them
  let merged: Record<string, unknown> = Object.fromEntries(Object.entries(raw).filter(([k]) => !k.startsWith("_")));
  if (opts.deepspeed) {
    const ds = opts.deepspeed;
    if (!isPlainObject(ds.raw)) {
      issues.push({ path: "", message: "expected a JSON object at the top of the DeepSpeed config", source: ds.source });
    } else {
      const dsOnly: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(ds.raw)) {
        if (k === "checkpoint") {
          // DeepSpeed's own checkpoint section (tag_validation, load_universal, ...); the job's
          // checkpoint keys (dir, save_interval, keep_last) belong in the job file
          const jobKeys = isPlainObject(v) ? Object.keys(v).filter((c) => Object.hasOwn(CHECKPOINT_SPEC.fields, c)) : [];
          for (const c of jobKeys) issues.push({ path: `checkpoint.${c}`, message: "a ZeroMoE job key, not one of DeepSpeed's checkpoint keys: put it in the job file (--config)", source: ds.source });
          if (jobKeys.length > 0) continue;
        } else if (!DEEPSPEED_TOP_KEYS.includes(k)) {
          if (Object.hasOwn(JOB_SPEC.fields, k)) {
            issues.push({ path: k, message: "not a DeepSpeed key; it is a ZeroMoE job key: put it in the job file (--config)", source: ds.source });
          } else if (!k.startsWith("_")) {
            // DeepSpeed reads its config with dict.get and drops keys it does not know ("_comment" is a note)
            const near = suggest(k, DEEPSPEED_TOP_KEYS);
            ctx.warnings.push(`${k}: not a DeepSpeed key, ignored as DeepSpeed ignores it [${ds.source}]${near ? `; did you mean "${near}"?` : ""}`);
          }
          continue;
        }
        dsOnly[k] = v;
        origin.set(k, ds.source);
        // an optimizer or scheduler of another type replaces the job's section (its params belong to that type)
        const base = merged[k];
        // (types compared only when both are strings: String() of an object whose own "toString" is
        // not a function throws "No default value"; a non-string type is reported by the check)
        if ((k === "optimizer" || k === "scheduler") && isPlainObject(base) && isPlainObject(v) && typeof v.type === "string" && typeof base.type === "string" && v.type.toLowerCase() !== base.type.toLowerCase()) delete merged[k];
      }
      merged = deepMerge(merged, dsOnly);
    }
  }
  if (opts.sets && opts.sets.length > 0) {
    merged = applySetOverrides(merged, opts.sets);
    for (const s of opts.sets) origin.set(s.path[0]!, "--set");
  }
  const ov = opts.overrides ?? {};
  for (const [k, v] of Object.entries(ov)) {
    if (v === undefined) continue;
    merged[k] = v;
    origin.set(k, "<command line>");
  }

  // "auto" values of a config written for the Hugging Face Trainer, filled from the job (auto-values.ts)
  const auto = fillAutoBeforeCheck(merged, raw, ctx);
  const out = check(merged, JOB_SPEC, "", ctx) as Record<string, unknown> | undefined;
  if (out === undefined) throw new ConfigError(issues, `invalid job ${jobSource}`);
  const autoFilled = auto.filled.length + auto.hidden.length > 0 && valid(ctx, "model", "zero_optimization");
  if (autoFilled) fillAutoAfterCheck(auto, out as unknown as JobConfig & { zero_optimization: Record<string, unknown> });
  // Cross-section rules run on every part that passed the schema, so one pass reports everything.
  resolveCrossFields(out as unknown as JobConfig, merged, ctx);
  if (autoFilled) ctx.warnings.push(`DeepSpeed "auto" values filled from the job as the Hugging Face Trainer fills them: ${describeAutoFill(auto, out).join("; ")}`);
  if (issues.length > 0) throw new ConfigError(issues, `invalid job ${jobSource}`);
  return { config: out as unknown as JobConfig, warnings: ctx.warnings };
}

/** True when no issue was recorded at or under any of `paths`. */
function valid(ctx: CheckContext, ...paths: string[]): boolean {
  return !ctx.issues.some((i) => paths.some((p) => i.path === p || i.path.startsWith(p + ".") || i.path.startsWith(p + "[")));
}

/** Largest counts of per-layer and per-expert structures a job may declare: code that walks the
 * model's layers or experts (parameter counts, the MoE layer shape, placements) allocates or loops
 * per item, so an untrusted `num_hidden_layers` of 2^31 must not reach it (issue 18: the decoder
 * fuzz found a 2^31-layer job using 24 GB). Far above any published model (≤ 126 layers, ≤ 384
 * experts per layer in 2026). */
export const MODEL_COUNT_LIMITS: Readonly<Record<string, number>> = { num_hidden_layers: 4096, num_local_experts: 65536, num_experts_per_tok: 65536 };

/** Adds an issue per model count over {@link MODEL_COUNT_LIMITS}; false when there was one. */
function modelSizesBounded(model: ModelConfig, ctx: CheckContext): boolean {
  let ok = true;
  for (const [k, max] of Object.entries(MODEL_COUNT_LIMITS)) {
    const v = (model as unknown as Record<string, unknown>)[k];
    if (typeof v === "number" && v > max) {
      addIssue(ctx, `model.${k}`, `${v} is above the supported maximum ${max}`);
      ok = false;
    }
  }
  return ok;
}

/**
 * The chat keys (docs/fine-tuning.md) against the dataset, with the other config errors and before
 * any backend starts: a chat `format`, `chat_template`, `train_on_prompt` or `packing` on a
 * dataset that cannot be chat data (a built-in corpus, .txt, .bin) would be refused when the data
 * loads (or do nothing); a `chat_template` that looks like a path (a folder or an extension) must exist.
 */
function checkChatKeys(d: JobConfig["data"], ctx: CheckContext): void {
  const tabular = d.dataset.endsWith(".jsonl") || d.dataset.endsWith(".parquet");
  if (!tabular) {
    const set: string[] = [];
    if (d.format !== undefined && d.format !== "auto" && d.format !== "text") set.push(`data.format "${d.format}"`);
    if (d.chat_template != null) set.push("data.chat_template");
    if (d.train_on_prompt) set.push("data.train_on_prompt");
    if (d.packing) set.push("data.packing");
    for (const k of set) addIssue(ctx, k.split(" ")[0]!, `${k} applies to chat data (a .jsonl or .parquet dataset of messages, alpaca or sharegpt records), but data.dataset is ${show(d.dataset)}`);
  } else if (d.format === "text" && (d.chat_template != null || d.train_on_prompt || d.packing)) {
    addIssue(ctx, "data.format", `data.format "text" reads ${show(d.dataset)} as plain text, so ${[d.chat_template != null && "data.chat_template", d.train_on_prompt && "data.train_on_prompt", d.packing && "data.packing"].filter(Boolean).join(", ")} would do nothing`);
  }
  const t = d.chat_template;
  if (typeof t === "string" && /[./\\]/.test(t)) {
    let ok = false;
    try {
      ok = statSync(t).isFile();
    } catch {
      ok = false;
    }
    if (!ok) addIssue(ctx, "data.chat_template", `${show(t)} is not a file (expected a Jinja chat template file, or the name of one of tokenizer_config.json's named templates)`);
  }
}

/** Fills model-dependent defaults and checks every rule that spans sections. */
function resolveCrossFields(job: JobConfig & { moe?: Partial<MoeConfig> | null }, raw: Record<string, unknown>, ctx: CheckContext): void {
  const model: ModelConfig = job.model;
  const modelOk = model !== undefined && valid(ctx, "model") && modelSizesBounded(model, ctx);
  if (modelOk) checkModelConsistency(model, "model", ctx);

  // a bare name (no extension, no folder) can only be a built-in dataset: a typo is named here,
  // with the other config errors and before any backend starts, instead of when the data loads
  if (valid(ctx, "data") && !BUILTIN_DATASETS.includes(job.data.dataset) && !/[./\\]/.test(job.data.dataset)) {
    const near = suggest(job.data.dataset, BUILTIN_DATASETS) ?? (/moby|dick/i.test(job.data.dataset) ? "moby-dick" : /sotu|union/i.test(job.data.dataset) ? "sotu" : null);
    addIssue(ctx, "data.dataset", `${show(job.data.dataset)} is not a built-in dataset (${BUILTIN_DATASETS.map((d) => `"${d}"`).join(", ")}) nor a file path (.txt, .jsonl, .parquet, .bin)${near ? `; did you mean "${near}"?` : ""}`);
  }

  if (valid(ctx, "data")) checkChatKeys(job.data, ctx);

  // data ↔ model
  if (modelOk && valid(ctx, "data")) {
    // a pre-tokenized .bin corpus tokenizes no text: its ids are checked against the model's vocabulary when read
    const tokVocab = job.data.dataset.endsWith(".bin") ? 0 : tokenizerVocabSize(job.data.tokenizer);
    if (model.vocab_size < tokVocab) {
      addIssue(ctx, "model.vocab_size", `model.vocab_size ${model.vocab_size} is smaller than the "${job.data.tokenizer}" tokenizer's vocabulary ${tokVocab}`);
    }
    if (job.data.seq_len > model.max_position_embeddings) {
      addIssue(ctx, "data.seq_len", `data.seq_len ${job.data.seq_len} exceeds model.max_position_embeddings ${model.max_position_embeddings}`);
    }
  }
  if (valid(ctx, "eval_interval", "data") && job.eval_interval > 0 && job.data.validation_fraction === 0) {
    addIssue(ctx, "eval_interval", `eval_interval ${job.eval_interval} needs a validation split, but data.validation_fraction is 0`);
  }
  if (valid(ctx, "checkpoint") && job.checkpoint.save_interval > 0 && job.checkpoint.dir === null) {
    addIssue(ctx, "checkpoint.save_interval", `save_interval ${job.checkpoint.save_interval} needs checkpoint.dir (a directory), got null`);
  }

  // batch-size rule over the data-parallel world (every rank is a dp rank here)
  const batchKeys = ["world_size", "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"];
  const batch =
    valid(ctx, ...batchKeys) &&
    resolveBatchSizes(
      {
        train_batch_size: raw.train_batch_size as number | undefined,
        train_micro_batch_size_per_gpu: raw.train_micro_batch_size_per_gpu as number | undefined,
        gradient_accumulation_steps: raw.gradient_accumulation_steps as number | undefined,
      },
      job.world_size,
      ctx,
    );
  if (batch) Object.assign(job, batch);

  // precision
  if (valid(ctx, "fp16", "bf16") && job.fp16.enabled && job.bf16.enabled) {
    addIssue(ctx, "fp16.enabled", "fp16.enabled and bf16.enabled are both true; enable at most one");
  }

  // optimizer
  if (valid(ctx, "optimizer") && job.optimizer.type === "AdamW" && !job.optimizer.params.adam_w_mode) {
    addIssue(
      ctx,
      "optimizer.params.adam_w_mode",
      'optimizer.type "AdamW" always uses decoupled weight decay; use type "Adam" with adam_w_mode false for L2 decay',
    );
  }

  // Lamb's keys (DeepSpeed FusedLamb): defaults for Lamb, refused for Adam/AdamW
  if (valid(ctx, "optimizer")) {
    const op = job.optimizer.params;
    const LAMB_KEYS = ["bias_correction", "max_grad_norm", "max_coeff", "min_coeff", "eps_inside_sqrt"] as const;
    if (job.optimizer.type === "Lamb") {
      op.bias_correction ??= true;
      op.max_grad_norm ??= 0;
      op.max_coeff ??= 10;
      op.min_coeff ??= 0.01;
      op.eps_inside_sqrt ??= false;
      if (op.min_coeff > op.max_coeff) addIssue(ctx, "optimizer.params.min_coeff", `min_coeff (${op.min_coeff}) must not exceed max_coeff (${op.max_coeff})`);
      if (!op.adam_w_mode) addIssue(ctx, "optimizer.params.adam_w_mode", 'optimizer.type "Lamb" adds weight decay to the update (it enters the trust ratio); adam_w_mode false has no meaning for it');
      if ((job.zero_optimization?.offload_optimizer?.device ?? "none") !== "none") addIssue(ctx, "zero_optimization.offload_optimizer.device", 'optimizer.type "Lamb" runs on the device only; optimizer offload steps AdamW/Adam');
    } else {
      for (const k of LAMB_KEYS) if (op[k] !== undefined) addIssue(ctx, `optimizer.params.${k}`, `${k} is a Lamb parameter; optimizer.type is "${job.optimizer.type}"`);
    }
  }

  // scheduler defaults from optimizer lr and steps
  const sch = job.scheduler;
  if (sch && valid(ctx, "scheduler", "optimizer", "steps")) {
    const p = sch.params as unknown as Record<string, unknown>;
    const warmup = sch.type === "WarmupLR" || sch.type === "WarmupDecayLR" || sch.type === "WarmupCosineLR"; // OneCycle/LRRangeTest set their own lrs
    if ((sch.type === "WarmupLR" || sch.type === "WarmupDecayLR") && p.warmup_max_lr === undefined) p.warmup_max_lr = job.optimizer.params.lr;
    if (warmup && sch.type !== "WarmupLR" && p.total_num_steps === undefined) {
      if (job.steps < 1) addIssue(ctx, "scheduler.params.total_num_steps", `required when steps is 0 (scheduler ${sch.type})`);
      p.total_num_steps = job.steps;
    }
    if (sch.type === "WarmupCosineLR") {
      const warm = Math.max(2, sch.params.warmup_num_steps);
      if (sch.params.total_num_steps <= warm) {
        ctx.warnings.push(
          `scheduler.params: total_num_steps ${sch.params.total_num_steps} is not above max(2, warmup_num_steps) = ${warm}: the run ends inside the warmup (DeepSpeed warns too)`,
        );
      }
    }
    if (sch.type === "WarmupDecayLR" && sch.params.total_num_steps < Math.max(2, sch.params.warmup_num_steps)) {
      ctx.warnings.push(
        `scheduler.params: total_num_steps ${sch.params.total_num_steps} is less than warmup_num_steps ${sch.params.warmup_num_steps} (DeepSpeed warns too)`,
      );
    }
  }

  // ZeRO offload
  const z = job.zero_optimization;
  if (valid(ctx, "zero_optimization")) {
    if (z.overlap_comm && z.stage < 2) {
      ctx.warnings.push(
        `zero_optimization.overlap_comm: true has no effect here (stage ${z.stage} reduces the gradients once, after the last micro-batch; buckets overlap backward at stages 2 and 3)`,
      );
    }
    if (z.offload_param.device !== "none" && z.stage !== 3) {
      addIssue(ctx, "zero_optimization.offload_param.device", `parameter offload needs zero_optimization.stage 3, got stage ${z.stage}`);
    }
    if (z.offload_optimizer.device !== "none" && z.stage === 0) {
      addIssue(ctx, "zero_optimization.offload_optimizer.device", "optimizer offload needs zero_optimization.stage 1, 2 or 3, got stage 0");
    }
    // the offload plugin (selected by the registry when a device is not "none") checks the rest of
    // its keys (docs/offload.md); here only what DeepSpeed's config validation refuses too
    for (const which of ["offload_optimizer", "offload_param"] as const) {
      if (z[which].device === "nvme" && z[which].nvme_path === null) {
        addIssue(ctx, `zero_optimization.${which}.nvme_path`, `device "nvme" needs nvme_path (a directory), got null`);
      }
    }
  }

  // activation checkpointing: present section means on, unless `enabled` says otherwise
  const acRaw = raw.activation_checkpointing;
  if (!valid(ctx, "activation_checkpointing")) return;
  const ac = (job.activation_checkpointing ??
    check({}, JOB_SPEC.fields.activation_checkpointing, "activation_checkpointing", ctx)) as JobConfig["activation_checkpointing"];
  if (ac.enabled === undefined) ac.enabled = isPlainObject(acRaw);
  job.activation_checkpointing = ac;

  // MoE
  if (!modelOk || !valid(ctx, "moe", "world_size")) return;
  job.moe = resolveMoe(job, raw, ctx);

  // AutoEP (a plugin selected through the registry replaces the MoE blocks; resolve-expert-parallel.ts)
  const ep = job.expert_parallel;
  if (valid(ctx, "expert_parallel") && ep.enabled) {
    if (!isSparseModel(model)) {
      addIssue(ctx, "expert_parallel.enabled", `AutoEP needs a model with MoE blocks; model_type is "${model.model_type}"`);
    } else {
      resolveExpertParallel(job, model, raw, ctx);
    }
  }
}

/** Resolves the `moe` section against the model: null for dense models. */
function resolveMoe(job: JobConfig & { moe?: Partial<MoeConfig> | null }, raw: Record<string, unknown>, ctx: CheckContext): MoeConfig | null {
  const model = job.model;
  const given = raw.moe !== undefined;
  if (!isSparseModel(model)) {
    if (given) addIssue(ctx, "moe", `a moe section needs a model with experts (model_type "mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v3" or "deepseek_v2"); model_type is "${model.model_type}"`);
    return null;
  }
  const m = (job.moe ?? check({}, JOB_SPEC.fields.moe, "moe", ctx)) as Partial<MoeConfig>;
  if (m.k === undefined) m.k = model.num_experts_per_tok;
  else if (m.k !== model.num_experts_per_tok) {
    addIssue(ctx, "moe.k", `moe.k ${m.k} differs from model.num_experts_per_tok ${model.num_experts_per_tok}; set model.num_experts_per_tok`);
  }
  if (m.aux_loss === undefined) m.aux_loss = "mixtral";
  if (m.aux_loss_coef === undefined) m.aux_loss_coef = model.router_aux_loss_coef;
  if (m.drop_tokens === undefined) m.drop_tokens = m.aux_loss !== "mixtral";
  const ep = m.ep_size ?? 1;
  if (model.num_local_experts % ep !== 0) {
    addIssue(ctx, "moe.ep_size", `num_local_experts ${model.num_local_experts} is not divisible by ep_size ${ep}`);
  }
  if (job.world_size % ep !== 0) {
    addIssue(ctx, "moe.ep_size", `world_size ${job.world_size} is not divisible by ep_size ${ep}${job.world_size < ep && model.num_local_experts % job.world_size === 0 ? ` (to run at world_size ${job.world_size}, e.g. to resume an ep_size-${ep} checkpoint, which reshards: --set moe.ep_size=${job.world_size}${job.expert_parallel?.enabled ? ` --set expert_parallel.autoep_size=${job.world_size}` : ""})` : ""}`);
  }
  // live re-placement (plugins/moe/src/live-replace.ts): only a placement computed from what training measures can change
  const every = m.replace_every ?? 0;
  if (every > 0) {
    if (m.placement === undefined || m.placement === "contiguous" || m.placement === "round_robin") {
      addIssue(ctx, "moe.replace_every", `moe.replace_every ${every} needs a placement that can change (moe.placement "balanced"); "${m.placement ?? "contiguous"}" always gives the same placement`);
    } else if (ep < 2) {
      addIssue(ctx, "moe.replace_every", `moe.replace_every ${every} needs moe.ep_size ≥ 2 (with ep_size ${ep} every expert is on every rank: nothing to move)`);
    }
    const z = job.zero_optimization;
    if (z && (z.offload_optimizer?.device ?? "none") !== "none") addIssue(ctx, "moe.replace_every", `moe.replace_every moves optimizer states on the device; zero_optimization.offload_optimizer.device is "${z.offload_optimizer.device}"`);
    if (z && (z.offload_param?.device ?? "none") !== "none") addIssue(ctx, "moe.replace_every", `moe.replace_every moves parameters on the device; zero_optimization.offload_param.device is "${z.offload_param.device}"`);
  }
  // expert tensor parallelism (docs/moe.md): ep × etp ranks hold one replica of the experts
  const etp = m.etp_size ?? 1;
  const width = moeShape(model)?.expertIntermediate ?? 0;
  if (etp > 1 && job.world_size % (ep * etp) !== 0) addIssue(ctx, "moe.etp_size", `world_size ${job.world_size} is not divisible by ep_size × etp_size = ${ep} × ${etp} = ${ep * etp}`);
  if (etp > 1 && width % etp !== 0) addIssue(ctx, "moe.etp_size", `the expert's intermediate size ${width} (${model.model_type === "mixtral" ? "model.intermediate_size" : "model.moe_intermediate_size"}) is not divisible by etp_size ${etp}`);
  if (etp > 1 && (model as { from_pretrained?: unknown }).from_pretrained !== undefined) addIssue(ctx, "moe.etp_size", `etp_size ${etp} with model.from_pretrained: loading Hub weights into expert slices is not supported; train from initialisation or use etp_size 1`);
  if (etp > 1 && every > 0) addIssue(ctx, "moe.etp_size", `etp_size ${etp} with moe.replace_every ${every}: live re-placement does not move expert slices; use one of them`);
  return m as MoeConfig;
}

/** Parses JSON text, turning a syntax error into a ConfigError naming the file, line and column, and
 * a key given twice in one object into one naming its path (as DeepSpeed refuses it).
 * The text is first checked against {@link CONFIG_JSON_LIMITS} (depth, string/key length, members),
 * so nothing downstream (deepMerge, messages, suggestions) works on an unbounded value. With
 * `opts.hjson` (job and DeepSpeed files) a text JSON.parse refuses is read as Hjson, DeepSpeed's
 * own config syntax (comments, optional commas; hjson-read.ts, same duplicate-key and bound checks).
 * @throws ConfigError naming the file and the JSON path of the first value over a limit. */
export function parseJsonConfig(text: string, source: string, opts: { hjson?: boolean } = {}): unknown {
  const over = scanJsonBounds(text, CONFIG_JSON_LIMITS);
  if (over !== null) throw new ConfigError([{ path: over.path, message: over.message, source }], `cannot read ${source}`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    // job and DeepSpeed files may be Hjson (comments, optional commas), as DeepSpeed reads them
    const h = opts.hjson ? parseHjson(text, source) : null;
    if (h !== null && "value" in h) return h.value;
    const found = findJsonSyntaxError(text);
    const msg = found ? `not valid JSON at line ${found.line}, column ${found.column}: ${found.message}` : `not valid JSON: ${e instanceof Error ? e.message : String(e)}`;
    throw new ConfigError([{ path: "", message: h !== null ? `${msg} (nor Hjson, DeepSpeed's config syntax: ${h.error})` : msg, source }], `cannot parse ${source}`);
  }
  // DeepSpeed refuses a repeated key ("Duplicate keys in DeepSpeed config"); JSON.parse keeps the last
  const dup = findDuplicateJsonKey(text);
  if (dup !== null) {
    const path = dup.path === "" ? dup.key : `${dup.path}.${dup.key}`;
    throw new ConfigError([{ path, message: `key ${describeValue(dup.key)} is given twice in one object (DeepSpeed refuses duplicate keys; keep one)`, source }], `cannot parse ${source}`);
  }
  return value;
}

/** Reads and parses a JSON file (Hjson too with `opts.hjson`, see {@link parseJsonConfig}); a
 * missing or unreadable file, or one that is not a regular file, is a ConfigError naming it. */
export async function readJsonFile(path: string, opts: { hjson?: boolean } = {}): Promise<unknown> {
  // a directory or FIFO is named as such (a FIFO's size is Infinity, and reading it blocks)
  const st = statSync(path, { throwIfNoEntry: false });
  if (st !== undefined && !st.isFile()) {
    throw new ConfigError([{ path: "", message: `not a regular file (${st.isDirectory() ? "a directory" : st.isFIFO() ? "a FIFO" : "a device or socket"})`, source: path }], `cannot read ${path}`);
  }
  if (st === undefined) {
    // a relative path names where it was looked for: `bun run` runs scripts in the repository root
    const where = isAbsolute(path) ? "" : ` (looked for ${resolve(path)}; relative paths start at the working directory, which \`bun run\` sets to the repository root)`;
    throw new ConfigError([{ path: "", message: `file not found: ${path}${where}`, source: path }], `cannot read ${path}`);
  }
  if (st.size > CONFIG_JSON_LIMITS.maxText) {
    throw new ConfigError([{ path: "", message: `file is ${st.size} bytes, over the ${CONFIG_JSON_LIMITS.maxText}-byte limit of a config file`, source: path }], `cannot read ${path}`);
  }
  return parseJsonConfig(await readFile(path, "utf8"), path, opts);
}
