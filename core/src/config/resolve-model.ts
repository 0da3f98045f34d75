/**
 * Validates one Hugging Face model config object (a `config.json`, or the job's `model` section
 * on its own) with the same schema and cross-field checks as the job's `model` section
 * (spec-model.ts), so there is one set of HF defaults and checks in the project.
 */
import { ConfigError } from "./errors.ts";
import { check, type CheckContext } from "./schema.ts";
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
 * @throws ConfigError listing every issue (JSON path + what was expected, did-you-mean for unknown keys).
 */
export function resolveModelConfig(raw: unknown, where = "model"): ResolvedModel {
  const ctx: CheckContext = { issues: [], warnings: [] };
  const out = check(raw, MODEL_SPEC, where, ctx) as ModelConfig | undefined;
  if (out !== undefined && ctx.issues.length === 0) checkModelConsistency(out, where, ctx);
  if (out === undefined || ctx.issues.length > 0) throw new ConfigError(ctx.issues, `invalid model config ${where}`);
  return { config: out, warnings: ctx.warnings };
}
