/**
 * Up-front estimate of a job's model-state memory per rank, from the config and the job's plugins
 * (nothing is allocated, no engine exists): domain.md §1 (ZeRO paper, Rajbhandari et al. SC'20 §5).
 *
 * Bytes per parameter: mixed precision (bf16/fp16) a = 2 (params), g = 2 (grads), o = 12 (fp32
 * master, m, v); fp32 a = 4, g = 4, o = 8. Core starts from what plain data parallelism holds:
 * every rank keeps every state of every parameter, in one part per kind of parameter (`dense`
 * Ψ_d and, for a sparse model, `expert` Ψ_e), each over a group of world_size ranks:
 * (a + g + o)·X bytes. Then the plugins' memory contributions (plugin-context.ts `PluginMemory`)
 * change it: every `layout` in plugin order (the MoE plugin: a rank keeps Ψ_e/P expert parameters
 * over its edp group of N/P ranks), then every `partition` on each part (a ZeRO stage: with
 * {@link partitionedBytes}, X over n ranks costs stage 1 (a+g)·X + o·X/n, stage 2 a·X + (g+o)·X/n,
 * stage 3 (a+g+o)·X/n). A third-party plugin changes the estimate the same way. Padding,
 * activations, gathered ZeRO-3 parameters and communication buffers come on top, so the estimate
 * is a lower bound.
 *
 * The largest single buffer is a whole unit in f32 (core/src/nn/unit.ts: an f32 unit's `data`, or
 * a 16-bit unit's f32 working copy `work` and gradient accumulator `workGrad`), whatever the stage:
 * a unit is always made whole before its forward/backward region.
 */
import { countParameters } from "../config/param-count.ts";
import { attentionParams, layerExtraParams, moeShape, uniformLayers } from "../config/moe-shape.ts";
import type { JobConfig, ModelConfig } from "../config/types.ts";
import type { Placement } from "../engine/plan.ts";
import type { MemoryEstimateInput, MemoryPart, PluginMemory } from "../engine/plugin-context.ts";

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
  /** The parts after the plugins' contributions (bytes per rank each). */
  parts: MemoryPart[];
  /** Bytes per rank of parameters, gradients, optimizer states, and their sum. */
  params: number;
  grads: number;
  optim: number;
  /** params + grads + optim: the device's model states. */
  total: number;
  /** Bytes per rank plugins keep in host memory instead (offload: `MemoryPart.host`). */
  host: number;
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
  const attn = attentionParams(m);
  const shape = moeShape(m);
  const units: UnitSize[] = [{ name: "embed", numel: m.vocab_size * H }];
  for (let l = 0; l < m.num_hidden_layers; l++) {
    const sparse = shape !== null && shape.layers.includes(l);
    const ffn = sparse ? H * shape.numExperts : 3 * H * m.intermediate_size;
    units.push({ name: `layers.${l}`, numel: attn + 2 * H + layerExtraParams(m, l) + ffn });
    if (sparse && shape.numExperts > 0) units.push({ name: `layers.${l}.experts.0`, numel: 3 * H * shape.expertIntermediate });
    if (uniformLayers(m)) break; // every layer alike: the first one stands for all
  }
  units.push({ name: "head", numel: H + (m.tie_word_embeddings ? 0 : m.vocab_size * H) });
  return units.reduce((a, b) => (b.numel > a.numel ? b : a));
}

/** What a plugin that may change the estimate carries (a plugin object, or anything with `memory`). */
export interface MemoryContributor {
  readonly name?: string;
  readonly memory?: PluginMemory;
}

/** `part` with its bytes for the given placements of params, gradients and optimizer states
 * (sharded: X/n elements per rank over the part's group of n ranks; replicated: X) — the formula
 * a ZeRO-like plugin's `memory.partition` returns. */
export function partitionedBytes(part: MemoryPart, input: MemoryEstimateInput, params: Placement, grads: Placement, optim: Placement): MemoryPart {
  const b = input.perParameter;
  const x = part.elements;
  const n = Math.max(1, part.groupSize);
  const per = (bytes: number, p: Placement) => (p === "sharded" ? (bytes * x) / n : bytes * x);
  return { ...part, params: per(b.param, params), grads: per(b.grad, grads), optim: per(b.optim, optim) };
}

/**
 * Estimate `config`'s model-state bytes per rank with `plugins`' contributions (see the module
 * comment). Precision: bf16.enabled or fp16.enabled → mixed; N: world_size.
 * @throws Error naming the plugin when a contribution returns a part with a negative or non-finite
 *   size.
 */
export function estimateModelState(config: JobConfig, plugins: readonly MemoryContributor[] = []): ModelStateEstimate {
  const count = countParameters(config.model);
  const mixed = config.bf16.enabled || config.fp16.enabled;
  const N = config.world_size;
  const b = stateBytesPerParameter(mixed);
  const input: MemoryEstimateInput = { config, mixed, perParameter: b };
  const replicated = (name: string, elements: number): MemoryPart => partitionedBytes({ name, elements, groupSize: N, params: 0, grads: 0, optim: 0 }, input, "replicated", "replicated", "replicated");
  let parts: MemoryPart[] = [replicated("dense", count.total - count.expert)];
  if (count.expert > 0) parts.push(replicated("expert", count.expert));
  const check = (ps: MemoryPart[], who: string): MemoryPart[] => {
    for (const q of ps) {
      for (const k of ["elements", "groupSize", "params", "grads", "optim", "host"] as const) {
        if (k === "host" && q.host === undefined) continue;
        if (!Number.isFinite(q[k]) || q[k]! < 0) throw new Error(`memory estimate: plugin "${who}" gave part "${q.name}" ${k} = ${q[k]} (expected a finite number ≥ 0)`);
      }
    }
    return ps;
  };
  for (const p of plugins) if (p.memory?.layout) parts = check(p.memory.layout(parts.map((q) => ({ ...q })), input), p.name ?? "?");
  for (const p of plugins) if (p.memory?.partition) parts = check(parts.map((q) => p.memory!.partition!({ ...q }, input)), p.name ?? "?");
  const params = parts.reduce((s, q) => s + q.params, 0);
  const grads = parts.reduce((s, q) => s + q.grads, 0);
  const optim = parts.reduce((s, q) => s + q.optim, 0);
  const unit = largestUnit(config.model);
  return {
    parameters: count.total,
    expertParameters: count.expert,
    stage: config.zero_optimization.stage,
    mixed,
    worldSize: N,
    epSize: config.moe?.ep_size ?? 1,
    perParameter: b,
    parts,
    params,
    grads,
    optim,
    total: params + grads + optim,
    host: parts.reduce((s, q) => s + (q.host ?? 0), 0),
    largestUnit: unit,
    largestBufferBytes: unit.numel * 4,
  };
}
