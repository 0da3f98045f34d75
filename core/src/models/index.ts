/** Hugging Face Llama and Mixtral causal LMs and their configs. */
export { llamaConfig, mixtralConfig, LLAMA_DEFAULTS, MIXTRAL_DEFAULTS } from "./config.ts";
export type { DecoderConfig, LlamaConfig, MixtralConfig } from "./config.ts";
export { CausalDecoder, LlamaForCausalLM, loadStateDict, selfAttention, swiglu, shiftLabels } from "./llama.ts";
export type { ModelOptions, CausalLMInput, CausalLMOutput, AttentionParams } from "./llama.ts";
export { MixtralForCausalLM } from "./mixtral.ts";
export type { MoEBlockOutput } from "./mixtral.ts";
export { generate, pickToken } from "./generate.ts";
export type { GenerateOptions } from "./generate.ts";
