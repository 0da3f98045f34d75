/**
 * Read a Hugging Face `config.json` for one model class. Thin wrappers over the project's single
 * HF model-config parser, {@link resolveModelConfig} (core/src/config/resolve-model.ts): same keys,
 * transformers defaults, checks and messages as the job's `model` section. The config types are
 * those of core/src/config/types.ts.
 */
import { ConfigError } from "../config/errors.ts";
import { resolveModelConfig } from "../config/resolve-model.ts";
import { show } from "../config/schema.ts";
import type { LlamaConfig, MixtralConfig, ModelConfig } from "../config/types.ts";

export type { LlamaConfig, MixtralConfig, ModelConfig } from "../config/types.ts";

/** Resolves `j` as `type`; an absent `model_type` means `type`, another one is an error. */
function resolveAs(type: ModelConfig["model_type"], j: Record<string, unknown>, where: string): ModelConfig {
  if (j["model_type"] !== undefined && j["model_type"] !== type) {
    throw new ConfigError(
      [{ path: `${where}.model_type`, message: `expected "${type}" (this reads ${type === "llama" ? "LlamaConfig" : "MixtralConfig"}), got ${show(j["model_type"])}` }],
      `invalid model config ${where}`,
    );
  }
  return resolveModelConfig({ ...j, model_type: type }, where).config;
}

/**
 * Parses a Llama `config.json` object (`model_type` "llama" or absent), filling transformers'
 * LlamaConfig defaults. Issue paths start with `where`.
 * @throws ConfigError naming every offending key (see {@link resolveModelConfig}).
 */
export function llamaConfig(j: Record<string, unknown> = {}, where = "config"): LlamaConfig {
  return resolveAs("llama", j, where) as LlamaConfig;
}

/**
 * Parses a Mixtral `config.json` object (`model_type` "mixtral" or absent), filling transformers'
 * MixtralConfig defaults. Issue paths start with `where`.
 * @throws ConfigError naming every offending key (see {@link resolveModelConfig}).
 */
export function mixtralConfig(j: Record<string, unknown> = {}, where = "config"): MixtralConfig {
  return resolveAs("mixtral", j, where) as MixtralConfig;
}
