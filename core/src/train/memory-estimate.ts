/**
 * Up-front estimate of a job's model-state memory per rank, from the config alone (nothing is
 * allocated): domain.md §1 (ZeRO paper, Rajbhandari et al. SC'20 §5) with Ψ split into a dense part
 * Ψ_d and an expert part Ψ_e, as plugins/moe/src/memory.ts states it (core may not import a
 * plugin, so the same formula is written here; core/test/train/memory-check.test.ts checks both
 * agree).
 *
 * Bytes per parameter: mixed precision (bf16/fp16) a = 2 (params), g = 2 (grads), o = 12 (fp32
 * master, m, v); fp32 a = 4, g = 4, o = 8. Dense parameters are partitioned over all N =
 * world_size ranks; a rank holds Ψ_e/P expert parameters (P = ep_size), partitioned over its edp
 * group of N/P ranks. Per part with X elements over n ranks: stage 0 (a+g+o)·X, stage 1
 * (a+g)·X + o·X/n, stage 2 a·X + (g+o)·X/n, stage 3 (a+g+o)·X/n. Padding, activations, gathered
 * ZeRO-3 parameters and communication buffers come on top, so the estimate is a lower bound.
 *
 * The largest single buffer is a whole unit in f32 (core/src/nn/unit.ts: an f32 unit's `data`, or
 * a 16-bit unit's f32 working copy `work` and gradient accumulator `workGrad`), whatever the stage:
 * a unit is always made whole before its forward/backward region.
 */
import { countParameters } from "../config/param-count.ts";
import type { JobConfig, ModelConfig } from "../config/types.ts";

/** Bytes per parameter of each kind of model state. */
export interface StateBytesPerParameter {
  param: number;
  grad: number;
  optim: number;
}

/** One unit's size (see core/src/nn/unit.ts for the layout). */
export interface UnitSize {
  /** Unit name as the model names it: `embed`, `layers.<i>`, `layers.<i>.experts.<e>`, `head`. */
  name: string;
  /** Elements. */
  numel: number;
}

/** What {@link estimateModelState} returns. All byte figures are per rank, without padding. */
export interface ModelStateEstimate {
  /** Ψ: all parameters. */
  parameters: number;
  /** Ψ_e: parameters inside experts (all experts of all layers; 0 for dense models). */
  expertParameters: number;
  stage: 0 | 1 | 2 | 3;
  /** bf16 or fp16 enabled. */
  mixed: boolean;
  worldSize: number;
  epSize: number;
  perParameter: StateBytesPerParameter;
  /** Bytes per rank of parameters, gradients, optimizer states, and their sum. */
  params: number;
  grads: number;
  optim: number;
  total: number;
  /** The largest unit (its f32 copy is the largest single buffer). */
  largestUnit: UnitSize;
  /** Bytes of the largest single buffer: `largestUnit.numel × 4`. */
  largestBufferBytes: number;
}

/** Bytes per parameter for mixed precision (2 + 2 + 12) or fp32 (4 + 4 + 8), domain.md §1. */
export function stateBytesPerParameter(mixed: boolean): StateBytesPerParameter {
  return mixed ? { param: 2, grad: 2, optim: 12 } : { param: 4, grad: 4, optim: 8 };
}

/**
 * The largest unit of the model `m` describes (units of core/src/models: embed V·H; a layer's
 * attention 2·H·nH·d + 2·H·nKV·d, two norms 2H and a SwiGLU MLP 3·H·I or, for Mixtral, a router
 * H·E; an expert 3·H·I; head H + V·H unless tied). The first of equal sizes wins.
 */
export function largestUnit(m: ModelConfig): UnitSize {
  const H = m.hidden_size;
  const attn = 2 * H * m.num_attention_heads * m.head_dim + 2 * H * m.num_key_value_heads * m.head_dim;
  const ffn = m.model_type === "mixtral" ? H * m.num_local_experts : 3 * H * m.intermediate_size;
  const units: UnitSize[] = [{ name: "embed", numel: m.vocab_size * H }];
  if (m.num_hidden_layers > 0) {
    units.push({ name: "layers.0", numel: attn + 2 * H + ffn });
    if (m.model_type === "mixtral" && m.num_local_experts > 0) units.push({ name: "layers.0.experts.0", numel: 3 * H * m.intermediate_size });
  }
  units.push({ name: "head", numel: H + (m.tie_word_embeddings ? 0 : m.vocab_size * H) });
  return units.reduce((a, b) => (b.numel > a.numel ? b : a));
}

/**
 * Estimate `config`'s model-state bytes per rank (see the module comment for the formula).
 * Precision: bf16.enabled or fp16.enabled → mixed; stage: zero_optimization.stage; N: world_size;
 * P: moe.ep_size (1 without a moe section).
 * @throws Error when world_size is not a multiple of ep_size (config validation refuses that first).
 */
export function estimateModelState(config: JobConfig): ModelStateEstimate {
  const count = countParameters(config.model);
  const stage = config.zero_optimization.stage;
  const mixed = config.bf16.enabled || config.fp16.enabled;
  const N = config.world_size;
  const P = config.moe?.ep_size ?? 1;
  if (!(N >= 1 && P >= 1 && N % P === 0)) throw new Error(`memory estimate: world_size ${N} is not a multiple of moe.ep_size ${P}`);
  const b = stateBytesPerParameter(mixed);
  const part = (x: number, n: number) => ({
    params: stage >= 3 ? (b.param * x) / n : b.param * x,
    grads: stage >= 2 ? (b.grad * x) / n : b.grad * x,
    optim: stage >= 1 ? (b.optim * x) / n : b.optim * x,
  });
  const dense = part(count.total - count.expert, N);
  const expert = part(count.expert / P, N / P);
  const params = dense.params + expert.params;
  const grads = dense.grads + expert.grads;
  const optim = dense.optim + expert.optim;
  const unit = largestUnit(config.model);
  return {
    parameters: count.total,
    expertParameters: count.expert,
    stage,
    mixed,
    worldSize: N,
    epSize: P,
    perParameter: b,
    params,
    grads,
    optim,
    total: params + grads + optim,
    largestUnit: unit,
    largestBufferBytes: unit.numel * 4,
  };
}
