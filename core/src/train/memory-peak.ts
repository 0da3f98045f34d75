/**
 * Up-front estimate of a rank's PEAK device memory during a training step: the model states
 * (memory-estimate.ts) plus everything a micro-batch's forward and backward hold at their fullest
 * moment — saved activations, gathered ZeRO-3 units, 16-bit units' f32 working copies and
 * gradient accumulators, the LM head + loss, the backward's transient gradients — as the backend's
 * per-tag accounting counts them (`memory().peakTotal`, the summary's `peak_total`), plus the
 * allocator's overhead on top (a separate term: {@link PeakEstimate.allocatorOverhead}).
 *
 * How: a walk over the moments where the live bytes can peak, in the order the engine runs them
 * (core/src/models/llama.ts forwardLayers, core/src/tensor/tape.ts backward), each the sum of what
 * is alive then:
 * - `forward layer l`: what the earlier layers keep + layer l's saved activations + its unit
 *   region (f32 working copies of 16-bit units, gathered ZeRO-3 parameters);
 * - `head forward` and `head backward`: all kept activations + the fused LM head + loss
 *   (core/src/tensor/ops/linear-cross-entropy.ts: one f32 logits tile of chunkTokens × tileVocab,
 *   lse [T]; backward: the tile, dh [T, H], the head weight's f32 gradient) — {@link headBytes},
 *   the one place to change when the head changes;
 * - `backward layer l` (top first): the kept activations of layers below + layer l's (recomputed
 *   under activation checkpointing) + the incoming residual gradient + the layer's largest
 *   transient gradients + its unit region with gradient buffers.
 * The step's peak is the largest of these (a micro-batch's peak; gradient accumulation adds none:
 * gradients accumulate into the model-state buffers).
 *
 * Activations are f32 (the backend computes in f32 for every precision), except the experts' gate
 * and up projections, kept in the experts' dtype (bf16/fp16 jobs: 2 bytes). Per token, with hidden H,
 * q = heads·head_dim, kv = kv_heads·head_dim, intermediate I (expert Ie), top-k and E experts, the
 * saved activations of a layer are (4 bytes each; layerActivationBytes):
 * - attention: input norm H, q/k/v projections q + 2kv, RoPE'd q/k q + kv, attention output q,
 *   o projection H, softmax log-sum-exp heads, norm statistics (Qwen3's q/k norms: q + kv more);
 * - residual + post-attention norm 2H and the block output + residual H (and H per norm);
 * - dense MLP: gate, up, silu·up 3I and down H;
 * - MoE: router logits and probabilities 2E, top-k values/indices/weights and permutation ~7k,
 *   dispatched rows k·H, expert gate/up 2k·Ie (nn/moe/grouped-swiglu.ts: silu·up is recomputed in
 *   the backward) and down k·H, combined output H (with
 *   capacity drops at most min(k, capacity) rows per token: k is the bound used);
 * - expert tensor parallelism (moe.etp_size P > 1): each expert unit is a 1/P slice (weights,
 *   gradients, stacks), and the etp all_gather / reduce_scatter keep (7P − 2)·k·H more
 *   ({@link etpRowsPerToken}); the backward's expert-row gradient covers P× the rows.
 * These were read off the ops' allocations and are checked against measured peaks on cpu and
 * lavapipe (core/test/train/memory-peak.test.ts, within 10 %).
 */
import type { JobConfig, ModelConfig } from "../config/types.ts";
import { moeShape } from "../config/moe-shape.ts";
import { groupedMemory } from "../nn/moe/grouped-weights.ts";
import { modelUnits, type ModelStateEstimate, type UnitSize } from "./memory-estimate.ts";

/** One moment of the walk: its name and the bytes alive then (model states included). */
export interface PeakMoment {
  name: string;
  bytes: number;
}

/** What {@link estimatePeak} returns (bytes per rank). */
export interface PeakEstimate {
  /** Model states at rest (params + grads + optim, memory-estimate.ts). */
  modelStates: number;
  /** Tokens of one micro-batch (train_micro_batch_size_per_gpu × seq_len). */
  tokens: number;
  /** Saved activations of each decoder layer without checkpointing. */
  layerActivations: number[];
  /** What a layer keeps between its forward and backward: its saved activations, or only its
   * output under activation checkpointing. */
  layerKept: number[];
  /** The fused LM head + loss at its fullest (forward or backward), without the layers. */
  head: number;
  /** Every moment of the walk, in order. */
  moments: PeakMoment[];
  /** The largest moment: the estimated `peak_total`. */
  peak: PeakMoment;
  /** Bytes the backend's allocator holds beyond its accounts at the peak (webgpu: freed buffers
   * kept for reuse), estimated as a fraction of the peak ({@link ALLOCATOR_OVERHEAD}). */
  allocatorOverhead: number;
  /** peak + allocatorOverhead: what the device must have. */
  deviceBytes: number;
}

/** The allocator's overhead over the accounted peak, per backend: cpu none (one typed array per
 * buffer); webgpu 10 % — its buffer pool keeps freed buffers for reuse, measured 1.5–9 % above the
 * accounted peak on allocation traces of a Mixtral step (kernels/src/webgpu/backend.ts
 * bufferPoolBytes), and a device budget releases the pool before refusing. */
export const ALLOCATOR_OVERHEAD: Readonly<Record<"cpu" | "webgpu", number>> = { cpu: 0, webgpu: 0.1 };

const F32 = 4;

/** Saved activation bytes of decoder layer `layer` of `m` for `T` tokens (module comment);
 * `mixed`: a bf16/fp16 job, whose experts keep their gate and up projections in 16 bits; `etp`:
 * moe.etp_size, whose all_gather / reduce_scatter keep {@link etpRowsPerToken} more expert rows. */
export function layerActivationBytes(m: ModelConfig, layer: number, T: number, mixed = false, etp = 1): number {
  const H = m.hidden_size;
  const nH = m.num_attention_heads;
  const D = m.head_dim;
  const q = nH * D;
  const kv = m.num_key_value_heads * D;
  const qkNorm = m.model_type === "qwen3_moe" ? q + kv + nH + m.num_key_value_heads : 0;
  // attention (norm, q/k/v, rope q/k, output, o) + lse + 2 norm statistics; residual sum, its
  // norm and the block output + residual 3H
  let perToken = 2 * H + 3 * q + 3 * kv + nH + 2 + qkNorm + 3 * H;
  let extra = 0;
  const shape = moeShape(m);
  if (shape !== null && shape.layers.includes(layer)) {
    const k = shape.topK;
    const E = shape.numExperts;
    // router 2E, top-k and permutation ~7k + 1, dispatched rows kH, expert outputs kH, combined H;
    // the experts' gate and up projections 2k·Ie in their dtype (grouped-swiglu.ts: silu·up is
    // recomputed in the backward, not kept)
    perToken += 2 * E + 7 * k + 1 + k * H + k * H + H + etpRowsPerToken(etp) * k * H;
    extra = (mixed ? 2 : F32) * T * 2 * k * shape.expertIntermediate;
    if (m.model_type === "qwen2_moe" && m.shared_expert_intermediate_size > 0) perToken += 3 * m.shared_expert_intermediate_size + H + 2;
  } else {
    perToken += 3 * m.intermediate_size + H;
  }
  return F32 * T * perToken + extra;
}

/**
 * Expert rows of H elements per routed token (×k) that expert tensor parallelism (moe.etp_size
 * `etp` = P > 1; plugins/moe/src/expert-tp.ts) keeps beyond the whole-expert path, f32. Each etp
 * rank computes its slice on the rows of all P members (P× its own; the intermediate activations
 * stay the same size: P× the rows at I/P), and the tape keeps every step's output: the all_gather's
 * P replicas of this rank's rows, the received P·n rows, their expert-major reorder, the P·n
 * partial outputs (in place of the whole expert's n), their member-order reorder, the
 * reduce_scatter's received P·n rows and the P − 1 sums (the last of which is the expert output
 * counted already): 6P + (P − 1) − 1 = 7P − 2 rows; 0 without etp.
 */
export function etpRowsPerToken(etp: number): number {
  return etp > 1 ? 7 * etp - 2 : 0;
}

/** Bytes of the grouped experts' f32 weight stack of one product: the experts a rank holds, in
 * runs within the stack budget (nn/moe/grouped-weights.ts), of the largest projection. */
function expertStackBytes(m: ModelConfig, held: number, etp = 1): number {
  const shape = moeShape(m);
  if (shape === null || held === 0) return 0;
  const w = (F32 * m.hidden_size * shape.expertIntermediate) / Math.max(1, etp);
  return w * Math.min(held, Math.max(1, Math.floor(groupedMemory.stackBytes / w)));
}

/** Transient bytes of layer `layer`'s forward beyond its saved activations (an MoE layer's experts,
 * grouped-swiglu.ts: h and u in f32 before they are cast for keeping, silu·up, one weight stack;
 * a dense layer: none beyond its saved tensors). */
function layerForwardTransient(m: ModelConfig, layer: number, T: number, mixed: boolean, held: number, etp = 1): number {
  const shape = moeShape(m);
  if (shape === null || !shape.layers.includes(layer)) return 0;
  const rows = T * shape.topK * shape.expertIntermediate;
  return F32 * 3 * rows - (mixed ? 2 : F32) * 2 * rows + expertStackBytes(m, held, etp);
}

/** Transient bytes at the largest moment of layer `layer`'s backward beyond its saved
 * activations. A dense layer: the SwiGLU backward — the gradients of gate, up and silu·up (3I per
 * token) and the residual stream's gradient H, less the block output and the residual sum 2H
 * freed by then. An MoE layer: the experts' elementwise backward (grouped-swiglu.ts) — the
 * gradients of the gate/up projections 2k·Ie, chunk temporaries, the incoming gradient of the
 * expert rows kH, the combine weights' gradient k and the residual stream's gradient H, less the
 * block output and residual sum 2H. */
function layerBackwardTransient(m: ModelConfig, layer: number, T: number, mixed: boolean, etp = 1): number {
  const H = m.hidden_size;
  const shape = moeShape(m);
  if (shape !== null && shape.layers.includes(layer)) {
    const k = shape.topK;
    const rows = T * k * shape.expertIntermediate;
    const chunks = (mixed ? 3 : 1) * F32 * Math.min(rows, groupedMemory.chunkElements);
    // under etp the incoming gradient covers the gathered rows: etp × kH
    return F32 * (2 * rows + T * (Math.max(1, etp) * k * H + k + H - 2 * H)) + chunks;
  }
  return F32 * T * (3 * m.intermediate_size + H - 2 * H);
}

/**
 * The fused LM head + loss's largest moment for `T` tokens (module comment; the one term to change
 * when the head changes): backward holds the final norm's output and statistics, lse, the
 * gradient of the normed hidden states dh [T, H] and of the residual stream [T, H], and one f32
 * logits tile of `chunkTokens × tileVocab` (the tile plan of linear-cross-entropy-plan.ts: a
 * 128 MiB budget, capped by the largest binding, with at least min(V, 4096) vocabulary entries).
 */
export function headBytes(m: ModelConfig, T: number, maxBindingBytes = Infinity): number {
  const H = m.hidden_size;
  const V = m.vocab_size;
  const budget = Math.max(1, Math.floor(Math.min(128 * 2 ** 20, maxBindingBytes) / 4));
  const chunk = Math.min(T, Math.max(1, Math.floor(budget / Math.min(V, 4096))));
  const tileVocab = Math.min(V, Math.floor(budget / chunk));
  const tile = F32 * chunk * tileVocab + F32 * 3 * chunk;
  return F32 * T * (3 * H + 3) + tile;
}

/** Bytes of `count` equal units' region beyond the model states: the f32 working copy of a 16-bit
 * unit (`mixed`), the gathered parameters under ZeRO-3 (`gatheredPerElement` bytes, 0 otherwise),
 * and with `grad` its f32 gradient accumulator (unit.ts `grad` / `workGrad`; the 16-bit gradient
 * is cast only at the region's end, when the layer's activations are freed). Expert units of a
 * 16-bit job have no working copy (unit.ts `workingCopy: false`): with `grad` only their 16-bit
 * micro-batch gradient, `expertGrad` bytes per element — 0 under ZeRO 0/1, whose reduce hooks
 * accumulate locally (the gradients go straight into the accumulator: unit.ts `gradInto`), and
 * under ZeRO 2/3 when the experts' group (edp, world_size / ep_size) is one rank; else 2. */
function unitRegion(u: UnitSize, count: number, mixed: boolean, gatheredPerElement: number, grad: boolean, expertGrad = 2): number {
  const n = u.numel * count;
  if (mixed && u.kind === "expert") return gatheredPerElement * n + (grad ? expertGrad * n : 0);
  return (mixed ? F32 * n : 0) + gatheredPerElement * n + (grad ? F32 * n : 0);
}

/**
 * Estimate the peak of `config` per rank with model states `ms` (memory-estimate.ts) — see the
 * module comment. `backend` picks the allocator overhead; `maxBindingBytes` the head's tile plan.
 */
export function estimatePeak(config: JobConfig, ms: ModelStateEstimate, backend: "cpu" | "webgpu" = config.backend === "cpu" ? "cpu" : "webgpu", maxBindingBytes = Infinity): PeakEstimate {
  const m = config.model;
  const T = config.train_micro_batch_size_per_gpu * config.data.seq_len;
  const H = m.hidden_size;
  const L = m.num_hidden_layers;
  const mixed = ms.mixed;
  const z3 = ms.stage === 3 && ms.worldSize > 1;
  const threshold = config.zero_optimization.stage3_param_persistence_threshold;
  const paramBytes = mixed ? 2 : 4;
  const etp = config.moe?.etp_size ?? 1;
  const units = modelUnits(m, etp);
  // ZeRO-3 (plugins/zero3 gatherer.ts): a gathered unit stays resident after its region until
  // stage3_max_live_parameters forces evictions, and the next units within
  // stage3_prefetch_bucket_size are fetched ahead — so at a moment of the forward the units up to
  // the current one (and the prefetched ones) are whole, in the backward all of them, bounded by
  // max_live + prefetch elements. Units under stage3_param_persistence_threshold are whole anyway
  // (model states).
  const gatheredPer = (_u: UnitSize) => 0;
  const zc = config.zero_optimization;
  // a rank holds one slice (of the etp_size an expert is declared as) of E/ep_size experts per layer
  const heldCount = (u: UnitSize) => (u.kind === "expert" ? Math.ceil(u.count / Math.max(1, etp) / ms.epSize) : u.count);
  const gatherable = units.map((u) => (z3 && u.numel >= threshold ? u.numel * heldCount(u) : 0));
  const liveBound = zc.stage3_max_live_parameters + zc.stage3_prefetch_bucket_size;
  /** Gathered bytes while unit `i` (index in `units`) is in use in forward (`i` = units.length: backward). */
  const gathered = (i: number): number => {
    if (!z3) return 0;
    let n = 0;
    for (let j = 0; j <= Math.min(i, units.length - 1); j++) n += gatherable[j]!;
    let budget = zc.stage3_prefetch_bucket_size;
    for (let j = i + 1; j < units.length && budget > 0; j++) {
      n += Math.min(budget, gatherable[j]!);
      budget -= gatherable[j]!;
    }
    return paramBytes * Math.min(n, liveBound);
  };
  const indexOf = (name: string) => units.findIndex((u) => u.name === name || (etp > 1 && u.name === `${name}.etp0`));
  const layerLast = (l: number) => Math.max(indexOf(`layers.${l}`), indexOf(`layers.${l}.experts.0`));
  const unitOf = (name: string) => units.find((u) => u.name === name || (etp > 1 && u.name === `${name}.etp0`));
  const ckpt = config.activation_checkpointing.enabled;
  const layerActivations = Array.from({ length: L }, (_, l) => layerActivationBytes(m, l, T, mixed, etp));
  const layerKept = layerActivations.map((a) => (ckpt ? F32 * T * H : a));
  const embedOut = F32 * T * H + 2 * F32 * T; // embedding output, ids and targets
  const heldExperts = (l: number) => {
    const ex = unitOf(`layers.${l}.experts.0`);
    return ex ? heldCount(ex) : 0;
  };
  const region = (l: number, backward: boolean) => {
    const lu = unitOf(`layers.${l}`)!;
    const ex = unitOf(`layers.${l}.experts.0`);
    // under expert parallelism a rank holds (and gathers) E/ep_size experts of a layer; at the
    // expert products' backward the experts' gradients exist, the layer unit's (router,
    // attention) not yet — a dense layer's MLP weights are in the layer unit
    return unitRegion(lu, 1, mixed, gatheredPer(lu), backward && !ex) + (ex ? unitRegion(ex, heldExperts(l), mixed, gatheredPer(ex), backward, ms.stage <= 1 || ms.worldSize / (ms.epSize * etp) <= 1 ? 0 : 2) : 0);
  };
  const head = unitOf("head")!;
  const embed = unitOf("embed")!;
  const headRegion = (backward: boolean) => unitRegion(head, 1, mixed, gatheredPer(head), backward) + (m.tie_word_embeddings ? unitRegion(embed, 1, mixed, gatheredPer(embed), false) : 0);
  const headPeak = headBytes(m, T, maxBindingBytes);
  const base = ms.total;
  const moments: PeakMoment[] = [];
  let kept = embedOut;
  for (let l = 0; l < L; l++) {
    moments.push({ name: `forward layer ${l}`, bytes: base + kept + layerActivations[l]! + layerForwardTransient(m, l, T, mixed, heldExperts(l), etp) + region(l, false) + gathered(layerLast(l)) });
    kept += layerKept[l]!;
  }
  const all = gathered(units.length);
  moments.push({ name: "head forward", bytes: base + kept + headPeak - F32 * T * 2 * H + headRegion(false) + all });
  moments.push({ name: "head backward", bytes: base + kept + headPeak + headRegion(true) + all });
  for (let l = L - 1; l >= 0; l--) {
    kept -= layerKept[l]!;
    // under checkpointing the layer is recomputed (its activations again) beside its kept output
    // and the checkpoint's copy of the incoming gradient
    const recompute = ckpt ? layerActivations[l]! + 2 * F32 * T * H : layerActivations[l]!;
    const ex = unitOf(`layers.${l}.experts.0`);
    if (ex) {
      // the combine's backward, before the experts are entered again: the expert output rows'
      // gradient and two row scratches (3k·H per token), the combine weights' gradient and its
      // scratch 2k, two residual-stream gradients 2H less the freed block output H
      const lu = unitOf(`layers.${l}`)!;
      const k = moeShape(m)!.topK;
      moments.push({ name: `backward layer ${l} combine`, bytes: base + kept + recompute + F32 * T * (3 * k * H + 2 * k + H) + unitRegion(lu, 1, mixed, gatheredPer(lu), false) + all });
    }
    moments.push({ name: `backward layer ${l}`, bytes: base + kept + recompute + layerBackwardTransient(m, l, T, mixed, etp) + region(l, true) + all });
  }
  moments.push({ name: "backward embed", bytes: base + embedOut + F32 * T * H + unitRegion(embed, 1, mixed, gatheredPer(embed), true) + all });
  const peak = moments.reduce((a, b) => (b.bytes > a.bytes ? b : a));
  const allocatorOverhead = ALLOCATOR_OVERHEAD[backend] * peak.bytes;
  return { modelStates: base, tokens: T, layerActivations, layerKept, head: headPeak, moments, peak, allocatorOverhead, deviceBytes: peak.bytes + allocatorOverhead };
}
