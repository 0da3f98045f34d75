/**
 * Llama (`LlamaForCausalLM`, Touvron et al. 2023) with exactly Hugging Face's semantics and
 * parameter names — a pre-norm decoder:
 *
 *   h = embed_tokens(ids)
 *   for each layer:  h = h + o_proj(attn(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))   n = input_layernorm(h)
 *                    h = h + down_proj(silu(gate_proj(m)) ⊙ up_proj(m))                   m = post_attention_layernorm(h)
 *   logits = lm_head(norm(h));  loss = mean cross-entropy of logits[:, t] vs labels[:, t+1]
 *
 * With labels, the head and the loss run fused by default (tensor/ops/linear-cross-entropy.ts:
 * per token chunk and vocabulary tile, the [B·S, vocab] logits never exist whole) and the output's
 * `logits` is null unless `returnLogits`; `fusedHead = false` selects the unfused path (logits
 * materialised, then crossEntropy).
 *
 * RMSNorm in f32 with weight, RoPE in the rotate_half layout, grouped-query attention (kv head
 * h·Hkv/H), causal mask, scale head_dim^−½.
 *
 * Parameters live in units (see `nn/unit.ts`): `embed` = model.embed_tokens, `layers.{i}` = one
 * decoder layer, `head` = model.norm + lm_head (with tie_word_embeddings, lm_head reads
 * model.embed_tokens.weight and the head region re-enters the `embed` unit). `forward` calls the
 * unit hooks (`model.units.hooks`) around each unit's region, and the tape fires the backward hooks.
 *
 * {@link CausalDecoder} holds everything but the feed-forward block, so Mixtral (mixtral.ts) only
 * adds its sparse MoE block and the load-balancing loss.
 */
import type { Backend, DType } from "@zeromoe/kernels";
import { initUnit } from "../nn/init.ts";
import { readParam, writeParam, type StateDict } from "../nn/state-dict.ts";
import { UnitSet, enterUnit, leaveUnit, checkParamShape, type Parameter, type ParamSpec, type Unit, type UnitKind } from "../nn/unit.ts";
import { add, addRmsnorm, causalAttention, checkIds, checkpoint, crossEntropy, embedding, gatherRows, isGradEnabled, linear, linearCrossEntropy, logitsZLoss, reshape, rmsnorm, rope, scale, scope, segmentsFromIds, withSegments, type SequenceSegments, siluMul, type TilePlanOptions } from "../tensor/index.ts";
import { Tensor, fromArray } from "../tensor/tensor.ts";
import type { LlamaConfig, ModelConfig } from "../config/types.ts";
import type { MoEParts } from "../nn/moe/layer.ts";
import type { ExpertSlice } from "../nn/moe/expert-slice.ts";
import type { KVCache, LayerKV } from "./kv-cache.ts";
import { ropeAttentionFactor, ropeFreqOf } from "./rope-scaling.ts";

/** Options for building a model. */
export interface ModelOptions {
  /** Parameter/gradient storage dtype (compute is f32): one for every unit, or chosen per unit
   * from its name and kind (e.g. keep `embed`/`head` in f32, layers in bf16). Default f32. */
  dtype?: DType | ((unit: { name: string; kind: UnitKind }) => DType);
  /** Seed of the parameter initialisation (Philox stream per parameter name). Default 0. */
  seed?: number;
  /** Allocate and initialise parameter buffers now (default true). With false, units start with
   * `data = null` (an engine provides them, e.g. ZeRO-3 initialising shards). */
  allocate?: boolean;
  /** Expert tensor parallelism: the slice of every expert this rank holds (nn/moe/expert-slice.ts);
   * absent or null: whole experts. */
  expertSlice?: ExpertSlice | null;
}

/** Input of a causal LM forward: token ids [batch, seq] row-major, optional labels (same shape;
 * −100 = ignore). As in HF, labels are shifted inside: logits at t are scored against labels at t+1. */
export interface CausalLMInput {
  inputIds: Int32Array | readonly number[];
  batch: number;
  seq: number;
  labels?: Int32Array | readonly number[];
  /** Inference with a key/value cache (models/kv-cache.ts; batch 1, under noGrad): `inputIds` are
   * the positions after the cached ones; their keys and values are appended. */
  cache?: KVCache;
  /** With labels and the fused head: also compute and return the logits (materialised
   * [batch·seq, vocab] f32, beside the fused loss; for tests and scoring). Default false. */
  returnLogits?: boolean;
  /** Without labels: only each sequence's last position's logits ([batch, 1, vocab]), as
   * generation needs; the head then reads batch rows instead of batch·seq (a long prompt's
   * [seq, vocab] logits could exceed a device binding). Default false. */
  lastLogitsOnly?: boolean;
  /** Weight of the cross-entropy term: the loss is `ceWeight`·CE + the extra (MoE aux) terms.
   * The engine sets it to n·accum·world/N (n this micro-batch's scored labels, N the whole
   * global batch's) so gradients are normalised by the global token count; 1 (the default)
   * leaves the graph unchanged. */
  ceWeight?: number;
  /** Packed sequences: per-token segment ids [batch, seq] (any integers; a segment is a maximal
   * run of equal ids within a row). RoPE positions restart at 0 and attention stays inside each
   * segment (tensor/ops/sequence-segments.ts). Not with `cache`. */
  segmentIds?: Int32Array | readonly number[];
}

/** Output of a causal LM forward. Tensors belong to the tape (freed by `backward`) or, under
 * `noGrad`, to the caller (dispose them). */
export interface CausalLMOutput {
  /** [batch, seq, vocab] ([batch, 1, vocab] with `lastLogitsOnly`); null when the fused head
   * computed the loss without them (labels given, `fusedHead` on, `returnLogits` off). */
  logits: Tensor | null;
  /** Scalar [1]: mean CE over valid shifted targets (+ router_aux_loss_coef·aux for Mixtral with
   * output_router_logits); null without labels. */
  loss: Tensor | null;
  /** Number of labels that counted (non-ignored shifted targets). */
  numTargets: number;
  /** Mixtral's load-balancing loss (before the coefficient), [1]; null for dense models. */
  auxLoss: Tensor | null;
}

/** HF's label shift: target[b, t] = labels[b, t+1] for t < seq−1, −100 at the last position. */
export function shiftLabels(labels: ArrayLike<number>, batch: number, seq: number, ignoreIndex = -100): { targets: Int32Array; numValid: number } {
  const targets = new Int32Array(batch * seq);
  let numValid = 0;
  for (let b = 0; b < batch; b++) {
    for (let t = 0; t < seq; t++) {
      const v = t < seq - 1 ? labels[b * seq + t + 1]! : ignoreIndex;
      targets[b * seq + t] = v;
      if (v !== ignoreIndex) numValid++;
    }
  }
  return { targets, numValid };
}

/** Parameters of one attention sublayer. */
export interface AttentionParams {
  q: Parameter;
  k: Parameter;
  v: Parameter;
  o: Parameter;
}

/** The softmax scale of a fully rotated head: head_dim^−½ times the square of the rope scaling's
 * attention factor (Transformers multiplies cos and sin by it, so q·k carries it twice;
 * rope-scaling.ts). */
export function attentionScale(cfg: ModelConfig): number {
  const a = ropeAttentionFactor(cfg);
  return (a * a) / Math.sqrt(cfg.head_dim);
}

/**
 * Self-attention of one layer on normed hidden states x [B·S, hidden] → [B·S, hidden]:
 * projections, RoPE on q and k, causal GQA attention, output projection. With `kv` (inference),
 * the layer's keys/values come from and go to a KV cache (kv-cache.ts).
 */
export function selfAttention(x: Tensor, p: AttentionParams, cfg: ModelConfig, B: number, S: number, kv?: LayerKV): Tensor {
  const H = cfg.num_attention_heads;
  const Hkv = cfg.num_key_value_heads;
  const D = cfg.head_dim;
  if (kv) {
    // inference with a KV cache: RoPE and attention at the cached offset (kv-cache.ts)
    const q = reshape(linear(x, p.q.tensor), [B, S, H, D]);
    const k = reshape(linear(x, p.k.tensor), [B, S, Hkv, D]);
    const v = reshape(linear(x, p.v.tensor), [B, S, Hkv, D]);
    const o = kv.cache.attend(kv.layer, q, k, v, ropeFreqOf(cfg, kv.cache.lengthOf(kv.layer) + S), attentionScale(cfg));
    return linear(reshape(o, [B * S, H * D]), p.o.tensor);
  }
  const freq = ropeFreqOf(cfg, S);
  const q = rope(reshape(linear(x, p.q.tensor), [B, S, H, D]), freq);
  const k = rope(reshape(linear(x, p.k.tensor), [B, S, Hkv, D]), freq);
  const v = reshape(linear(x, p.v.tensor), [B, S, Hkv, D]);
  const o = causalAttention(q, k, v, attentionScale(cfg));
  return linear(reshape(o, [B * S, H * D]), p.o.tensor);
}

/** SwiGLU feed-forward (Shazeer 2020): down(silu(gate(x)) ⊙ up(x)); x [n, hidden] → [n, hidden].
 * The activation is the fused {@link siluMul} (one kernel each way; on the cpu backend bit-identical
 * to `mul(silu(·), ·)`, and the tape's order of x's gradient contributions is unchanged). */
export function swiglu(x: Tensor, gate: Parameter, up: Parameter, down: Parameter): Tensor {
  return linear(siluMul(linear(x, gate.tensor), linear(x, up.tensor)), down.tensor);
}

/** Parameters of one decoder layer besides the feed-forward block. */
interface LayerParams {
  /** Llama's q/k/v/o projections; null for a family with its own attention (attentionSpecs). */
  attn: AttentionParams | null;
  inputNorm: Parameter;
  postNorm: Parameter;
}

/**
 * Base of Llama-style causal decoders: embeddings, attention layers, final norm, lm_head, loss.
 * Subclasses declare each layer's feed-forward parameters and compute it.
 */
export abstract class CausalDecoder<C extends ModelConfig = ModelConfig> {
  readonly be: Backend;
  readonly config: C;
  /** All units in forward order; `units.hooks` are the installed unit hooks. */
  readonly units: UnitSet;
  readonly embedUnit: Unit;
  readonly layerUnits: Unit[] = [];
  readonly headUnit: Unit;
  protected readonly layerParams: LayerParams[] = [];
  protected readonly embedTokens: Parameter;
  protected readonly finalNorm: Parameter;
  protected readonly lmHead: Parameter;
  readonly seed: number;
  /** The slice of every expert this rank holds under expert tensor parallelism, or null. */
  readonly expertSlice: ExpertSlice | null;
  /** Recompute each decoder layer during backward instead of keeping its activations (HF
   * `gradient_checkpointing`, DeepSpeed `activation_checkpointing`); see tensor/checkpoint.ts. */
  gradientCheckpointing = false;
  /** Take the loss with the fused LM head + cross-entropy (tensor/ops/linear-cross-entropy.ts: the
   * logits never exist whole; the default). false: materialise the logits, then crossEntropy (the
   * unfused path, kept for comparison). */
  fusedHead = true;
  /** PaLM's z-loss coefficient on the LM head (Chowdhery et al. 2022): the loss gains
   * coef·mean(logsumexp(logits)²) over the scored positions. Default 0 (off). */
  lmZLossCoef = 0;
  /** Chunk/tile overrides of the fused head (linear-cross-entropy-plan.ts); default: planned from
   * the shapes and the device's binding limit. */
  headTiles: TilePlanOptions = {};
  /** The router and token dispatcher of the model's MoE layers (nn/moe/layer.ts), which the route
   * hook replaces; null for a dense model. */
  readonly moe: MoEParts | null = null;
  /** The KV cache of the forward in progress (input.cache), else null. */
  protected kvCache: KVCache | null = null;

  /** Layer `i`'s handle on the KV cache of the forward in progress, or undefined (training). A
   * family with its own attention passes it on to {@link KVCache.attend}. */
  protected kvOf(i: number): LayerKV | undefined {
    return this.kvCache ? { cache: this.kvCache, layer: i } : undefined;
  }

  constructor(be: Backend, config: C, opts: ModelOptions = {}) {
    this.be = be;
    this.config = config;
    this.seed = opts.seed ?? 0;
    this.expertSlice = opts.expertSlice ?? null;
    const dtypeOpt = opts.dtype ?? "f32";
    const dtypeOf = (name: string, kind: UnitKind): DType => (typeof dtypeOpt === "function" ? dtypeOpt({ name, kind }) : dtypeOpt);
    const allocate = opts.allocate ?? true;
    const c = config;
    const std = c.initializer_range;
    const normal = { kind: "normal", std } as const;
    this.units = new UnitSet(be);
    this.embedUnit = this.units.add({ name: "embed", kind: "embed", dtype: dtypeOf("embed", "embed"), allocate, params: [{ name: "model.embed_tokens.weight", shape: [c.vocab_size, c.hidden_size], init: normal }] });
    this.embedTokens = this.units.param("model.embed_tokens.weight");
    for (let i = 0; i < c.num_hidden_layers; i++) {
      const pre = `model.layers.${i}`;
      const qd = c.num_attention_heads * c.head_dim;
      const kvd = c.num_key_value_heads * c.head_dim;
      const specs: ParamSpec[] = [
        ...(this.attentionSpecs(i, normal) ?? [
          { name: `${pre}.self_attn.q_proj.weight`, shape: [qd, c.hidden_size], init: normal },
          { name: `${pre}.self_attn.k_proj.weight`, shape: [kvd, c.hidden_size], init: normal },
          { name: `${pre}.self_attn.v_proj.weight`, shape: [kvd, c.hidden_size], init: normal },
          { name: `${pre}.self_attn.o_proj.weight`, shape: [c.hidden_size, qd], init: normal },
        ]),
        ...this.feedForwardSpecs(i, normal),
        { name: `${pre}.input_layernorm.weight`, shape: [c.hidden_size], init: { kind: "ones" } },
        { name: `${pre}.post_attention_layernorm.weight`, shape: [c.hidden_size], init: { kind: "ones" } },
      ];
      this.layerUnits.push(this.units.add({ name: `layers.${i}`, kind: "layer", layer: i, dtype: dtypeOf(`layers.${i}`, "layer"), allocate, params: specs }));
      const P = (n: string) => this.units.param(`${pre}.${n}`);
      const standard = this.units.has(`${pre}.self_attn.k_proj.weight`);
      this.layerParams.push({
        // a family with its own attention parameters (attentionSpecs) reads them itself
        attn: standard ? { q: P("self_attn.q_proj.weight"), k: P("self_attn.k_proj.weight"), v: P("self_attn.v_proj.weight"), o: P("self_attn.o_proj.weight") } : null,
        inputNorm: P("input_layernorm.weight"),
        postNorm: P("post_attention_layernorm.weight"),
      });
      this.addLayerExtras(i, dtypeOf, allocate, normal);
    }
    const headSpecs: ParamSpec[] = [{ name: "model.norm.weight", shape: [c.hidden_size], init: { kind: "ones" } }];
    if (!c.tie_word_embeddings) headSpecs.push({ name: "lm_head.weight", shape: [c.vocab_size, c.hidden_size], init: normal });
    this.headUnit = this.units.add({ name: "head", kind: "head", dtype: dtypeOf("head", "head"), allocate, params: headSpecs });
    this.finalNorm = this.units.param("model.norm.weight");
    this.lmHead = c.tie_word_embeddings ? this.embedTokens : this.units.param("lm_head.weight");
    if (allocate) for (const u of this.units.units) initUnit(u, this.seed);
  }

  /** The attention parameters of layer `layer` when the family's differ from Llama's q/k/v/o
   * projections (DeepSeek's multi-head latent attention), else null (Llama's). Called from the
   * constructor: only `this.config` may be read. */
  protected attentionSpecs(_layer: number, _normal: { kind: "normal"; std: number }): ParamSpec[] | null {
    return null;
  }

  /** Feed-forward parameters that live in the layer unit (dense MLP, or the MoE router). */
  protected abstract feedForwardSpecs(layer: number, normal: { kind: "normal"; std: number }): ParamSpec[];

  /** Extra units after layer `layer`'s unit (Mixtral's experts). */
  protected addLayerExtras(_layer: number, _dtypeOf: (name: string, kind: UnitKind) => DType, _allocate: boolean, _normal: { kind: "normal"; std: number }): void {}

  /** The feed-forward block of layer `layer` on normed x [T, hidden] → [T, hidden]. */
  protected abstract feedForward(layer: number, x: Tensor): Promise<Tensor>;

  /** The checkpointed layer `layer` returned these extra outputs (those of
   * {@link layerOutputsToKeep}); use them instead of the ones the region stored. */
  protected adoptLayerOutputs(_layer: number, _extras: Tensor[]): void {}

  /** Tensors made inside layer `layer` that must outlive its scope (e.g. router statistics). */
  protected layerOutputsToKeep(_layer: number): Tensor[] {
    return [];
  }

  /** Called before the layers run (reset per-forward state, e.g. router statistics). */
  protected beginForward(): void {}

  /** The auxiliary loss of the forward that just ran, reported in the output (null by default). */
  protected auxLossOfLastForward(): Tensor | null {
    return null;
  }

  /** Extra loss terms added to the CE loss (Mixtral's aux loss); null for none. */
  protected extraLoss(_tokens: number): Tensor | null | Promise<Tensor | null> {
    return null;
  }

  /** Forward pass; see {@link CausalLMInput} / {@link CausalLMOutput}.
   * @throws on ids/labels outside the vocabulary or of the wrong length. */
  async forward(input: CausalLMInput): Promise<CausalLMOutput> {
    const c = this.config;
    const { batch: B, seq: S } = input;
    if (!Number.isInteger(B) || !Number.isInteger(S) || B < 1 || S < 1) throw new Error(`forward: batch and seq must be positive integers, got ${B}, ${S}`);
    if (input.inputIds.length !== B * S) throw new Error(`forward: inputIds has ${input.inputIds.length} ids, expected batch·seq = ${B * S}`);
    if (S > c.max_position_embeddings) throw new Error(`forward: seq ${S} exceeds config.max_position_embeddings ${c.max_position_embeddings}`);
    checkIds(input.inputIds, c.vocab_size, "inputIds");
    if (input.ceWeight !== undefined && !(Number.isFinite(input.ceWeight) && input.ceWeight >= 0)) throw new Error(`forward: ceWeight must be a finite number ≥ 0, got ${input.ceWeight}`);
    if (input.cache) {
      if (isGradEnabled()) throw new Error("forward: a KV cache is for inference (run under noGrad)");
      if (input.cache.length + S > input.cache.capacity) throw new Error(`forward: ${input.cache.length} cached + ${S} new positions exceed the KV cache capacity ${input.cache.capacity}`);
    }
    let shifted: { targets: Int32Array; numValid: number } | null = null;
    if (input.lastLogitsOnly && input.labels) throw new Error("forward: lastLogitsOnly is for a forward without labels (the loss needs every position)");
    if (input.labels) {
      if (input.labels.length !== B * S) throw new Error(`forward: labels has ${input.labels.length} entries, expected ${B * S}`);
      checkIds(input.labels, c.vocab_size, "labels", -100);
      shifted = shiftLabels(input.labels, B, S);
    }
    let segments: SequenceSegments | null = null;
    if (input.segmentIds) {
      if (input.cache) throw new Error("forward: segmentIds (packed training rows) cannot be used with a KV cache");
      segments = segmentsFromIds(input.segmentIds, B, S);
    }
    this.beginForward();
    this.kvCache = input.cache ?? null;
    try {
      return await this.forwardLayers(input, shifted, segments);
    } finally {
      this.kvCache = null;
    }
  }

  /** The body of {@link forward} after the input checks. */
  private async forwardLayers(input: CausalLMInput, shifted: { targets: Int32Array; numValid: number } | null, segments: SequenceSegments | null): Promise<CausalLMOutput> {
    const c = this.config;
    const { batch: B, seq: S } = input;
    const be = this.be;
    const ids = fromArray(be, Int32Array.from(input.inputIds), [B * S], "i32");

    await enterUnit(this.embedUnit);
    let h = embedding(this.embedTokens.tensor, ids);
    await leaveUnit(this.embedUnit);

    for (let i = 0; i < c.num_hidden_layers; i++) {
      const u = this.layerUnits[i]!;
      await enterUnit(u);
      const prev = h;
      // packed rows: the layer (and its recomputation under checkpointing) sees the segments
      const layer = (x: Tensor): Promise<Tensor[]> => withSegments(segments, async () => [await this.decoderLayer(i, x, B, S), ...this.layerOutputsToKeep(i)]);
      if (this.gradientCheckpointing && isGradEnabled()) {
        // Keep only the layer's input and outputs; recompute the rest during backward.
        const outs = await checkpoint(layer, [prev]);
        h = outs[0]!;
        this.adoptLayerOutputs(i, outs.slice(1));
      } else {
        // In no-grad mode the scope frees the layer's intermediates except what it returns.
        [h] = await scope(() => layer(prev));
      }
      if (!isGradEnabled()) prev.dispose();
      await leaveUnit(u);
    }

    const tied = c.tie_word_embeddings;
    await enterUnit(this.headUnit);
    if (tied) await enterUnit(this.embedUnit);
    const { logits, ce } = scope(() => {
      const n = rmsnorm(h, this.finalNorm.tensor, c.rms_norm_eps);
      const w = this.lmHead.tensor;
      const fused = shifted !== null && this.fusedHead;
      // generation: the head reads only each sequence's last position
      const last = input.lastLogitsOnly ? gatherRows(n, fromArray(be, Int32Array.from({ length: B }, (_, b) => b * S + S - 1), [B], "i32")) : null;
      const lg = !fused || input.returnLogits ? linear(last ?? n, w) : null;
      let loss: Tensor | null = null;
      if (shifted) {
        const { targets, numValid } = shifted;
        const z = this.lmZLossCoef;
        const tg = fromArray(be, targets, [B * S], "i32");
        if (fused) loss = linearCrossEntropy(n, w, tg, numValid, { ...this.headTiles, zLoss: z, hostTargets: targets });
        else {
          loss = crossEntropy(lg!, tg, numValid);
          if (z > 0) loss = add(loss, logitsZLoss(lg!, targets, numValid, z));
        }
      }
      return { logits: lg ? reshape(lg, [B, last ? 1 : S, c.vocab_size]) : null, ce: loss };
    });
    if (tied) await leaveUnit(this.embedUnit);
    await leaveUnit(this.headUnit);

    let loss = ce;
    const w = input.ceWeight ?? 1;
    if (loss && w !== 1) loss = scale(loss, w);
    const extra = await this.extraLoss(B * S);
    if (loss && extra) loss = add(loss, extra);
    return { logits, loss, numTargets: shifted?.numValid ?? 0, auxLoss: this.auxLossOfLastForward() };
  }

  /** One decoder layer on the residual stream h [B·S, hidden]. */
  protected async decoderLayer(i: number, h: Tensor, B: number, S: number): Promise<Tensor> {
    const c = this.config;
    const p = this.layerParams[i]!;
    const a = selfAttention(rmsnorm(h, p.inputNorm.tensor, c.rms_norm_eps), p.attn!, c, B, S, this.kvOf(i));
    // h2 = h + a and its post-attention norm in one op (cpu: bit-identical to add + rmsnorm)
    const { sum: h2, normed } = addRmsnorm(h, a, p.postNorm.tensor, c.rms_norm_eps);
    const m = await this.feedForward(i, normed);
    return add(h2, m);
  }

  /** The model's buffers by Hugging Face name: state that is saved with the model but not trained
   * (DeepSeek-V3's `e_score_correction_bias`); the live arrays. None for most families. */
  buffers(): Map<string, Float32Array> {
    return new Map();
  }

  /** All parameters in unit order. */
  parameters(): Parameter[] {
    return this.units.parameters();
  }

  /** Parameter by Hugging Face name. */
  param(name: string): Parameter {
    return this.units.param(name);
  }

  /** Total number of parameter elements (tied weights counted once). */
  get numParameters(): number {
    return this.units.numel;
  }

  /** Zero (or free) all gradients. */
  zeroGrad(free = false): void {
    this.units.zeroGrad(free);
  }

  /** Free every buffer of the model. */
  destroy(): void {
    this.units.destroy();
  }

  /** Load parameters by Hugging Face name (see {@link loadStateDict}). Subclasses extend the name
   * mapping (Mixtral's fused experts). @throws on missing or mis-shaped tensors. */
  loadStateDict(sd: StateDict, opts: { strict?: boolean } = {}): void {
    const used = new Set<string>();
    for (const p of this.parameters()) {
      const t = sd.get(p.name);
      if (t) {
        checkParamShape(p, t.shape, "loadStateDict");
        writeParam(p, t, 0, "loadStateDict");
        used.add(p.name);
      } else if (!this.loadAlternative(p, sd, used)) {
        throw new Error(`loadStateDict: missing tensor ${p.name}`);
      }
    }
    if (this.config.tie_word_embeddings && sd.has("lm_head.weight")) used.add("lm_head.weight");
    if (opts.strict ?? true) {
      const extra = [...sd.keys()].filter((k) => !used.has(k) && !k.endsWith("rotary_emb.inv_freq"));
      if (extra.length > 0) throw new Error(`loadStateDict: unexpected tensors ${extra.slice(0, 5).join(", ")}${extra.length > 5 ? ` (+${extra.length - 5} more)` : ""}`);
    }
  }

  /** Load `p` from another naming of the same values; return false if none is present. */
  protected loadAlternative(_p: Parameter, _sd: StateDict, _used: Set<string>): boolean {
    return false;
  }

  /** All parameters as host tensors in the units' dtype, Hugging Face names (Hub layout). */
  async stateDict(): Promise<StateDict> {
    const sd: StateDict = new Map();
    for (const p of this.parameters()) sd.set(p.name, await readParam(p));
    return sd;
  }
}

/** `LlamaForCausalLM`. */
export class LlamaForCausalLM extends CausalDecoder<LlamaConfig> {
  private mlp: { gate: Parameter; up: Parameter; down: Parameter }[] = [];

  protected feedForwardSpecs(layer: number, normal: { kind: "normal"; std: number }): ParamSpec[] {
    const c = this.config;
    const pre = `model.layers.${layer}.mlp`;
    return [
      { name: `${pre}.gate_proj.weight`, shape: [c.intermediate_size, c.hidden_size], init: normal },
      { name: `${pre}.up_proj.weight`, shape: [c.intermediate_size, c.hidden_size], init: normal },
      { name: `${pre}.down_proj.weight`, shape: [c.hidden_size, c.intermediate_size], init: normal },
    ];
  }

  protected async feedForward(layer: number, x: Tensor): Promise<Tensor> {
    if (this.mlp.length === 0) {
      for (let i = 0; i < this.config.num_hidden_layers; i++) {
        const P = (n: string) => this.units.param(`model.layers.${i}.mlp.${n}.weight`);
        this.mlp.push({ gate: P("gate_proj"), up: P("up_proj"), down: P("down_proj") });
      }
    }
    const m = this.mlp[layer]!;
    return swiglu(x, m.gate, m.up, m.down);
  }
}

/** Load a state dict into a model (HF names; Mixtral also accepts Transformers 5's fused experts).
 * @throws on missing, unexpected (when strict) or mis-shaped tensors. */
export function loadStateDict(model: CausalDecoder, sd: StateDict, opts: { strict?: boolean } = {}): void {
  model.loadStateDict(sd, opts);
}
