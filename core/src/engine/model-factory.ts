/**
 * Build the model a job names (`model.model_type`: "llama" | "mixtral" | "qwen3_moe" | "qwen2_moe" | "deepseek_v3" | "deepseek_v2", Hugging Face config keys).
 */
import type { Backend } from "@zeromoe/kernels";
import type { ModelConfig } from "../config/types.ts";
import { LlamaForCausalLM, type CausalDecoder, type ModelOptions } from "../models/llama.ts";
import { MixtralForCausalLM } from "../models/mixtral.ts";
import { DeepseekV2ForCausalLM, DeepseekV3ForCausalLM } from "../models/deepseek.ts";
import { Qwen2MoeForCausalLM } from "../models/qwen2-moe.ts";
import { Qwen3MoeForCausalLM } from "../models/qwen3-moe.ts";

/** A new model on `be` from an already-resolved model config (`resolveJobConfig` /
 * `resolveModelConfig` checked and defaulted it; it is not parsed again here).
 * @throws for an unknown `model_type` (naming it). */
export function createModel(be: Backend, cfg: ModelConfig, opts: ModelOptions): CausalDecoder {
  switch (cfg.model_type) {
    case "llama":
      return new LlamaForCausalLM(be, cfg, opts);
    case "mixtral":
      return new MixtralForCausalLM(be, cfg, opts);
    case "qwen3_moe":
      return new Qwen3MoeForCausalLM(be, cfg, opts);
    case "qwen2_moe":
      return new Qwen2MoeForCausalLM(be, cfg, opts);
    case "deepseek_v3":
      return new DeepseekV3ForCausalLM(be, cfg, opts);
    case "deepseek_v2":
      return new DeepseekV2ForCausalLM(be, cfg, opts);
    default:
      throw new Error(`model.model_type: expected "llama", "mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v3" or "deepseek_v2", got ${JSON.stringify((cfg as { model_type: unknown }).model_type)}`);
  }
}
