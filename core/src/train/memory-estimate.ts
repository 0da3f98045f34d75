/**
 * Up-front estimate of a job's model-state memory per rank, from the config and the job's plugins
 * (nothing is allocated, no engine exists): docs/domain.md §1 (ZeRO paper, Rajbhandari et al. SC'20 §5).
 *
 * Bytes per parameter: mixed precision (bf16/fp16) a = 2 (params), g = 2 (grads), o = 12 (fp32
 * master, m, v); fp32 a = 4, g = 4, o = 8. Core starts from what plain data parallelism holds:
 * every rank keeps every state of every parameter, in one part per kind of parameter (`dense`
 * Ψ_d and, for a sparse model, `expert` Ψ_e), each over a group of world_size ranks:
 * (a + g + o)·X bytes. Then the plugins' memory contributions (plugin-context.ts `PluginMemory`)
 * change it: every `layout` in plugin order (the MoE plugin: a rank keeps Ψ_e/P expert parameters
 * over its edp group of N/P ranks), then every `partition` on each part (a ZeRO stage: with
 * {@link partitionedBytes}, X over n ranks costs stage 1 (a+g)·X + o·X/n, stage 2 a·X + (g+o)·X/n,
 * stage 3 (a+g+o)·X/n). A third-party plugin changes the estimate the same way. The contributions
 * see the model's units ({@link modelUnits}) in `input.units`, so a partition that treats units by
 * size (ZeRO-3 keeps units under `stage3_param_persistence_threshold` whole:
 * {@link partElementsInUnitsBelow}) counts them exactly. Padding, activations, gathered ZeRO-3
 * parameters and communication buffers come on top, so the estimate is a lower bound.
 *
 * The largest single buffer is a whole unit in f32 (core/src/nn/unit.ts: an f32 unit's `data`, or
 * a 16-bit unit's f32 working copy `work` and gradient accumulator `workGrad`), whatever the stage:
 * a unit is always made whole before its forward/backward region.
 */
import { largestBuffer, type LargestBuffer } from "./largest-buffer.ts";
import { countParameters } from "../config/param-count.ts";
import { attentionParams, layerExtraParams, moeShape } from "../config/moe-shape.ts";
import type { JobConfig, ModelConfig } from "../config/types.ts";
import type { Placement } from "../engine/plan.ts";
import type { MemoryEstimateInput, MemoryPart, PluginMemory } from "../engine/plugin-context.ts";
import type { UnitKind } from "../nn/unit.ts";

/** Bytes per parameter of each kind of model state. */
export interface StateBytesPerParameter {
  param: number;
  grad: number;
  optim: number;
}

/** One unit's size (see core/src/nn/unit.ts for the layout), or a run of equal units. */
export interface UnitSize {
  /** Unit name as the model names it: `embed`, `layers.<i>`, `layers.<i>.experts.<e>`, `head`
   * (for a run of `count` experts, the first one's: `layers.<i>.experts.0`). */
  name: string;
  /** The unit's kind (core/src/nn/unit.ts): expert units form the `expert` memory part, the others
   * the `dense` part. */
  kind: UnitKind;
  /** Elements of one unit. */
  numel: number;
  /** Units this entry stands for: a MoE layer's E experts (all the same size) are one entry with
   * count E; every other entry has count 1. */
  count: number;
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
  /** The unit of the largest single buffer (largest-buffer.ts). */
  largestUnit: UnitSize;
  /** Bytes of the largest single buffer as the engine allocates it (largest-buffer.ts: the unit in
   * f32, or for a 16-bit job's experts their 16-bit storage, f32 optimizer shard or grouped
   * weight stack). */
  largestBufferBytes: number;
  /** The largest single buffer: its unit, bytes and what it is. */
  largestBuffer: LargestBuffer;
}

/** Bytes per parameter for mixed precision (2 + 2 + 12) or fp32 (4 + 4 + 8), docs/domain.md §1. */
export function stateBytesPerParameter(mixed: boolean): StateBytesPerParameter {
  return mixed ? { param: 2, grad: 2, optim: 12 } : { param: 4, grad: 4, optim: 8 };
}

/**
 * The units of the model `m` describes, in model order (units of core/src/models: embed V·H; a
 * layer's attention (config/moe-shape.ts `attentionParams`), two norms 2H, the family's extras
 * (`layerExtraParams`) and a SwiGLU MLP 3·H·I or, in a MoE layer, a router H·E; after a MoE layer
 * its E experts of 3·H·I_e each, as one entry of count E; head H + V·H unless tied). One entry per
 * layer (at most 4096 by the config's bounds), so the list stays short for any expert count.
 * With expert tensor parallelism (`etpSize` = moe.etp_size T > 1) the model declares every expert
 * as T slice units of 3·H·I_e/T elements (core/src/nn/moe/expert-slice.ts): one entry
 * `layers.<i>.experts.0.etp0` of count E·T.
 */
export function modelUnits(m: ModelConfig, etpSize = 1): UnitSize[] {
  const H = m.hidden_size;
  const attn = attentionParams(m);
  const shape = moeShape(m);
  const sparse = new Set(shape?.layers ?? []);
  const units: UnitSize[] = [{ name: "embed", kind: "embed", numel: m.vocab_size * H, count: 1 }];
  for (let l = 0; l < m.num_hidden_layers; l++) {
    const moe = shape !== null && sparse.has(l);
    const ffn = moe ? H * shape.numExperts : 3 * H * m.intermediate_size;
    units.push({ name: `layers.${l}`, kind: "layer", numel: attn + 2 * H + layerExtraParams(m, l) + ffn, count: 1 });
    if (moe && shape.numExperts > 0) {
      const T = etpSize > 1 ? etpSize : 1;
      units.push({ name: T > 1 ? `layers.${l}.experts.0.etp0` : `layers.${l}.experts.0`, kind: "expert", numel: (3 * H * shape.expertIntermediate) / T, count: shape.numExperts * T });
    }
  }
  units.push({ name: "head", kind: "head", numel: H + (m.tie_word_embeddings ? 0 : m.vocab_size * H), count: 1 });
  return units;
}

/** The largest unit of the model `m` describes ({@link modelUnits}); the first of equal sizes wins. */
export function largestUnit(m: ModelConfig, etpSize = 1): UnitSize {
  return largestOf(modelUnits(m, etpSize));
}

/** The largest of `units` (non-empty); the first of equal sizes wins. */
function largestOf(units: readonly UnitSize[]): UnitSize {
  return units.reduce((a, b) => (b.numel > a.numel ? b : a));
}

/** The unit kinds whose parameters make up core's memory part `name` (`dense`, `expert`), or null
 * for a part core does not know (a plugin's own). */
function kindsOfPart(name: string): readonly UnitKind[] | null {
  if (name === "dense") return ["embed", "layer", "head"];
  if (name === "expert") return ["expert"];
  return null;
}

/**
 * Elements of `part` (its `elements` as this rank holds them, after the layouts) that lie in units
 * with fewer than `threshold` elements — what ZeRO-3 keeps whole under
 * `stage3_param_persistence_threshold` (DeepSpeed: "Do not partition parameters smaller than this
 * threshold"). Computed from `input.units`: the small units' share of all units of the part's
 * kinds, times `part.elements` (exact under expert parallelism: a rank holds E/ep_size of each
 * layer's equal-sized experts). 0 for a part core does not know or whose units hold no elements.
 */
export function partElementsInUnitsBelow(part: MemoryPart, input: MemoryEstimateInput, threshold: number): number {
  const kinds = kindsOfPart(part.name);
  if (kinds === null) return 0;
  let all = 0;
  let small = 0;
  for (const u of input.units) {
    if (!kinds.includes(u.kind)) continue;
    all += u.numel * u.count;
    if (u.numel < threshold) small += u.numel * u.count;
  }
  if (all === 0 || small === 0) return 0;
  return small === all ? part.elements : (small * part.elements) / all;
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
  const units = modelUnits(config.model, config.moe?.etp_size ?? 1);
  const input: MemoryEstimateInput = { config, mixed, perParameter: b, units };
  const replicated = (name: string, elements: number): MemoryPart => partitionedBytes({ name, elements, groupSize: N, params: 0, grads: 0, optim: 0 }, input, "replicated", "replicated", "replicated");
  let parts: MemoryPart[] = [replicated("dense", count.total - count.expert)];
  if (count.expert > 0) parts.push(replicated("expert", count.expert));
  const check = (ps: MemoryPart[], who: string): MemoryPart[] => {
    for (const q of ps) {
      for (const k of ["elements", "groupSize", "params", "grads", "optim", "host", "wholeParams"] as const) {
        if ((k === "host" || k === "wholeParams") && q[k] === undefined) continue;
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
  const largest = largestBuffer(config, units);
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
    largestUnit: largest.unit,
    largestBufferBytes: largest.bytes,
    largestBuffer: largest,
  };
}
