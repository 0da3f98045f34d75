/**
 * The model config a checkpoint manifest records (`config.model`), validated as a config.json is
 * (resolveModelConfig: schema, consistency, MODEL_COUNT_LIMITS; idempotent on a config the trainer
 * resolved). The manifest's checksum only shows the file was not edited by accident: a re-signed
 * one with num_attention_heads 0 was built and evaluated, and zero-to-fp32 wrote its config.json.
 */
import { ConfigError } from "../config/errors.ts";
import { resolveModelConfig } from "../config/resolve-model.ts";
import type { ModelConfig } from "../config/types.ts";
import type { CheckpointManifest } from "./manifest.ts";

/**
 * `m.config.model`, checked.
 * @param file the manifest's path (the issues' source)
 * @throws ConfigError listing every issue, with `file` as its source.
 */
export function manifestModelConfig(m: CheckpointManifest, file: string): ModelConfig {
  try {
    return resolveModelConfig(m.config.model, "config.model").config;
  } catch (e) {
    if (e instanceof ConfigError) throw new ConfigError(e.issues.map((i) => ({ ...i, source: file })), `invalid model config in ${file}`);
    throw e;
  }
}
