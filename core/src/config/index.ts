/** Job configuration: schema, validation, defaults, the default job. See docs/config.md. */
export * from "./types.ts";
export { ConfigError, type ConfigIssue, editDistance, suggest, formatIssue } from "./errors.ts";
export { pathForMessage, quoteUntrusted, QUOTE_CHARS, QUOTE_MESSAGE_CHARS, QUOTE_PATH_CHARS } from "./quote-untrusted.ts";
export { resolveJobConfig, deepMerge, parseJsonConfig, readJsonFile, TOKENIZER_VOCAB_SIZE, type JobOverrides, type ResolveOptions } from "./resolve.ts";
export { loadJobConfig, type LoadJobOptions } from "./load.ts";
export { resolveModelConfig, type ResolvedModel } from "./resolve-model.ts";
export { resolveBatchSizes, type BatchInput, type BatchSizes } from "./batch.ts";
export { DEFAULT_JOB } from "./default-job.ts";
export { JOB_SPEC } from "./spec-job.ts";
export { DEEPSPEED_TOP_KEYS } from "./spec-deepspeed.ts";
export { AUTOEP_PRESETS, type AutoEPPreset, type AutoEPPresetName } from "./autoep-presets.ts";
export { isSparseModel, moeLayerIndices, moeShape, modelBufferNames, type MoEShape } from "./moe-shape.ts";
export { parseByteSize, formatByteSize } from "./byte-size.ts";
export { countParameters, type ParameterCount } from "./param-count.ts";
export { summarizeJob, formatCount } from "./summary.ts";
