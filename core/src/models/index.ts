/** Hugging Face Llama and Mixtral causal LMs and their configs. */
export { llamaConfig, mixtralConfig } from "./config.ts";
export type { LlamaConfig, MixtralConfig, ModelConfig } from "./config.ts";
export { CausalDecoder, LlamaForCausalLM, loadStateDict, selfAttention, swiglu, shiftLabels } from "./llama.ts";
export type { ModelOptions, CausalLMInput, CausalLMOutput, AttentionParams } from "./llama.ts";
export { MixtralForCausalLM } from "./mixtral.ts";
export { Qwen3MoeForCausalLM } from "./qwen3-moe.ts";
export { Qwen2MoeForCausalLM } from "./qwen2-moe.ts";
export { DeepseekV3ForCausalLM, DeepseekV2ForCausalLM } from "./deepseek.ts";
export { multiHeadLatentAttention, type MLAShape, type MLAParams } from "./mla-attention.ts";
export { SparseMoEDecoder, type MoEBlockRecord, type QwenMoeConfig } from "./sparse-moe-decoder.ts";
export type { MoEBlockOutput } from "./mixtral.ts";
export { generate, pickToken } from "./generate.ts";
export type { GenerateOptions } from "./generate.ts";
