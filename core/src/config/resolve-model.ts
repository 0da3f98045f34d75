/**
 * Validates one Hugging Face model config object (a `config.json`, or the job's `model` section
 * on its own) with the same schema and cross-field checks as the job's `model` section
 * (spec-model.ts), so there is one set of HF defaults and checks in the project; and takes a job's
 * model config from a Hub checkpoint directory's config.json ({@link applyHubModel}).
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { ConfigError, type ConfigIssue } from "./errors.ts";
import { CONFIG_JSON_LIMITS } from "./json-bounds.ts";
import { MODEL_COUNT_LIMITS, parseJsonConfig } from "./resolve.ts";
import { addIssue, check, show, type CheckContext } from "./schema.ts";
import { checkModelConsistency, MODEL_SPEC } from "./spec-model.ts";
import type { ModelConfig } from "./types.ts";

/** A resolved model config plus non-fatal warnings (HF keys accepted and ignored, e.g. `architectures`). */
export interface ResolvedModel {
  config: ModelConfig;
  warnings: string[];
}

/**
 * Resolves a Hugging Face `config.json` object (`model_type` "llama" or "mixtral", transformers'
 * LlamaConfig / MixtralConfig key names; Transformers 5 `rope_parameters` accepted) into a
 * {@link ModelConfig} with every transformers default filled in and `num_key_value_heads` /
 * `head_dim` resolved to numbers. Issue paths start with `where` (e.g. `model.hidden_size`).
 * Sources: transformers `configuration_llama.py`, `configuration_mixtral.py`.
 * @throws ConfigError listing every issue (JSON path + what was expected, did-you-mean for unknown
 *   keys; layer and expert counts above the job's MODEL_COUNT_LIMITS).
 */
export function resolveModelConfig(raw: unknown, where = "model"): ResolvedModel {
  const ctx: CheckContext = { issues: [], warnings: [] };
  const out = check(raw, MODEL_SPEC, where, ctx) as ModelConfig | undefined;
  // the job's bounds on layer and expert counts (MODEL_COUNT_LIMITS) before anything walks them: a
  // config.json read by generate/eval with num_hidden_layers 1e9 hung building the model
  if (out !== undefined && ctx.issues.length === 0) {
    for (const [k, max] of Object.entries(MODEL_COUNT_LIMITS)) {
      const v = (out as unknown as Record<string, unknown>)[k];
      if (typeof v === "number" && v > max) addIssue(ctx, `${where}.${k}`, `${v} is above the supported maximum ${max}`);
    }
  }
  if (out !== undefined && ctx.issues.length === 0) checkModelConsistency(out, where, ctx);
  if (out === undefined || ctx.issues.length > 0) throw new ConfigError(ctx.issues, `invalid model config ${where}`);
  return { config: out, warnings: ctx.warnings };
}

/** Options of {@link applyHubModel}. */
export interface HubModelOptions {
  /** `--init-from`: a directory with config.json supplies the model config. */
  initFrom?: string;
  /** Directory that a relative `model.from_pretrained` starts from (the job file's). */
  baseDir: string;
  /** The job's `model` section is the built-in default job's (no --config): replace it. */
  defaultModel?: boolean;
  /** Name of the job file, for messages. */
  source?: string;
}

/**
 * The job with its `model` section taken from a Hugging Face checkpoint directory's config.json:
 * `"model": {"from_pretrained": DIR}` (DIR relative to `baseDir`), or `--init-from DIR` when DIR
 * holds a config.json. Every key of config.json is kept (model_type selects the family); keys the
 * job's `model` section gives besides `from_pretrained` must agree with config.json (compared after
 * defaults, so `rope_theta` matches `rope_parameters.rope_theta`) or the run stops naming each one.
 * `model.from_pretrained` is kept as an absolute path (the engine initialises the weights from it).
 * The job is returned unchanged when neither applies.
 * @throws ConfigError naming config.json (missing, unreadable, invalid) or each differing key.
 */
export function applyHubModel(raw: Record<string, unknown>, opts: HubModelOptions): Record<string, unknown> {
  const given = raw.model;
  const fp = given !== null && typeof given === "object" && !Array.isArray(given) ? (given as Record<string, unknown>).from_pretrained : undefined;
  if (fp !== undefined && typeof fp !== "string") {
    throw new ConfigError([{ path: "model.from_pretrained", message: `expected a directory path (string), got ${show(fp)}`, source: opts.source }], `invalid job ${opts.source ?? "<job>"}`);
  }
  let dir: string | undefined;
  if (typeof fp === "string") dir = resolve(opts.baseDir, fp);
  else if (opts.initFrom !== undefined && existsSync(opts.initFrom) && statSync(opts.initFrom).isDirectory() && existsSync(join(opts.initFrom, "config.json"))) dir = resolve(opts.initFrom);
  if (dir === undefined) return raw;
  const where = typeof fp === "string" ? "model.from_pretrained" : "--init-from";
  const cfgPath = join(dir, "config.json");
  if (!existsSync(cfgPath)) {
    const what = existsSync(dir) ? `${dir} has no config.json` : `${dir} does not exist`;
    throw new ConfigError([{ path: where, message: `${what} (a Hugging Face save_pretrained directory holds config.json and the weights)`, source: opts.source }], `invalid job ${opts.source ?? "<job>"}`);
  }
  const st = statSync(cfgPath);
  // before reading: a directory fails with EISDIR, a FIFO blocks until a writer comes
  if (!st.isFile()) throw new ConfigError([{ path: "", message: `not a regular file (${st.isDirectory() ? "a directory" : st.isFIFO() ? "a FIFO" : "a device or socket"})`, source: cfgPath }], `cannot read ${cfgPath}`);
  if (st.size > CONFIG_JSON_LIMITS.maxText) throw new ConfigError([{ path: "", message: `file is over the ${CONFIG_JSON_LIMITS.maxText}-byte limit of a config file`, source: cfgPath }], `cannot read ${cfgPath}`);
  const hf = parseJsonConfig(readFileSync(cfgPath, "utf8"), cfgPath);
  if (hf === null || typeof hf !== "object" || Array.isArray(hf)) throw new ConfigError([{ path: "", message: "expected a JSON object", source: cfgPath }], `cannot read ${cfgPath}`);
  const hfObj = hf as Record<string, unknown>;
  // config.json on its own must be a valid model config (errors name the file)
  let base: Record<string, unknown>;
  try {
    base = resolveModelConfig(hfObj, "model").config as unknown as Record<string, unknown>;
  } catch (e) {
    if (e instanceof ConfigError) throw new ConfigError(e.issues.map((i) => ({ ...i, source: cfgPath })), `invalid model config ${cfgPath}`);
    throw e;
  }
  const job = opts.defaultModel || given === undefined || given === null || typeof given !== "object" ? {} : { ...(given as Record<string, unknown>) };
  delete job.from_pretrained;
  const issues: ConfigIssue[] = [];
  for (const [k, v] of Object.entries(job)) {
    let mine: unknown;
    try {
      mine = (resolveModelConfig({ ...hfObj, [k]: v }, "model").config as unknown as Record<string, unknown>)[k];
    } catch {
      mine = v; // an invalid value: reported as differing
    }
    const theirs = base[k] ?? hfObj[k];
    if (JSON.stringify(mine) !== JSON.stringify(theirs) && JSON.stringify(v) !== JSON.stringify(hfObj[k])) {
      issues.push({ path: `model.${k}`, message: `${show(v)} differs from ${cfgPath}: ${show(hfObj[k] ?? theirs)} (remove the key from the job's model section or make it agree)`, source: opts.source });
    }
  }
  if (issues.length > 0) throw new ConfigError(issues, `the job's model section disagrees with ${cfgPath}`);
  const model: Record<string, unknown> = { ...hfObj };
  if (typeof fp === "string") model.from_pretrained = dir;
  return { ...raw, model };
}
