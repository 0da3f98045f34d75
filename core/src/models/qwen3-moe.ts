/**
 * Qwen3-MoE (`Qwen3MoeForCausalLM`, Qwen Team 2025) with Hugging Face Transformers 5.17's semantics
 * and parameter names: the Llama decoder (llama.ts `CausalDecoder`) with
 *
 *   attention: q = rope(q_norm(q_proj(n)) per head), k = rope(k_norm(k_proj(n)) per head), v = v_proj(n)
 *              (q_norm / k_norm: RMSNorm over head_dim, weight [head_dim], before RoPE; head_dim is
 *              its own key, not necessarily hidden_size / num_attention_heads)
 *   feed-forward of layer l: experts when l ∉ mlp_only_layers and (l + 1) % decoder_sparse_step == 0
 *              (config/moe-shape.ts), else a dense SwiGLU MLP of intermediate_size
 *   MoE block: router_logits = gate(x) [T, E]; p = softmax(router_logits) in f32; top-k by p;
 *              weights = p of the chosen (renormalised to sum 1 when norm_topk_prob);
 *              out = Σ w_i · down_i(silu(gate_i x) ⊙ up_i x)   (moe_intermediate_size)
 *   aux loss:  HF `load_balancing_loss_func` over the MoE layers' router logits concatenated
 *              (as Mixtral, models/mixtral.ts, with L = the number of MoE layers); added with
 *              router_aux_loss_coef when output_router_logits.
 *
 * Each MoE layer is an `MoELayer` (nn/moe/layer.ts: router → dispatcher → GroupedExperts →
 * combine) with the model's shared `moe` parts, so the route hook (the moe plugin: expert
 * parallelism, DeepSpeed router options) applies unchanged. Expert e of layer l is the unit
 * `layers.{l}.experts.{e}` holding `model.layers.{l}.mlp.experts.{e}.{gate,up,down}_proj.weight`
 * (the Hub layout save_pretrained writes); the router `model.layers.{l}.mlp.gate.weight` and
 * q_norm/k_norm live in the layer unit. Transformers 5's fused in-memory layout
 * (`mlp.experts.gate_up_proj` [E, 2·I, H], `mlp.experts.down_proj` [E, H, I]) is read by
 * `loadStateDict` and by `--init-from` (checkpoint/hub-layouts.ts).
 */
import type { Backend, DType } from "@zeromoe/kernels";
import { moeLayerIndices } from "../config/moe-shape.ts";
import type { Qwen3MoeConfig } from "../config/types.ts";
import { LocalDispatcher } from "../nn/moe/dispatcher.ts";
import { GroupedExperts, type ExpertParams } from "../nn/moe/experts.ts";
import { MoELayer, type MoEParts } from "../nn/moe/layer.ts";
import { TopKRouter } from "../nn/moe/router.ts";
import { writeParam, type StateDict } from "../nn/state-dict.ts";
import type { Parameter, ParamSpec, UnitKind } from "../nn/unit.ts";
import { add, causalAttention, fromArray, linear, mean, mul, reshape, rmsnorm, rope, scale, sum } from "../tensor/index.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { CausalDecoder, swiglu, type ModelOptions } from "./llama.ts";

/** `Qwen3MoeForCausalLM` (module comment). */
export class Qwen3MoeForCausalLM extends CausalDecoder<Qwen3MoeConfig> {
  override readonly moe: MoEParts;
  /** The MoE layer of each decoder layer with experts (undefined for dense layers). */
  readonly moeLayers: (MoELayer | undefined)[] = [];
  /** Per MoE layer of the last forward: mean router probability [E] and pre-drop counts. */
  lastBlocks: ({ routerProbMean: Tensor; expertCounts: Int32Array; gateLoss: Tensor | null } | undefined)[] = [];
  /** The load-balancing loss of the last forward (before the coefficient), or null. */
  lastAuxLoss: Tensor | null = null;
  private readonly sparse: Set<number>;
  private readonly dense: ({ gate: Parameter; up: Parameter; down: Parameter } | undefined)[] = [];
  private readonly qkNorm: { q: Parameter; k: Parameter }[] = [];

  constructor(be: Backend, config: Qwen3MoeConfig, opts: ModelOptions = {}) {
    super(be, config, opts);
    this.sparse = new Set(moeLayerIndices(config));
    this.moe = { router: new TopKRouter(config.output_router_logits ? config.router_aux_loss_coef : null), dispatcher: new LocalDispatcher() };
    for (let l = 0; l < config.num_hidden_layers; l++) {
      const pre = `model.layers.${l}`;
      this.qkNorm.push({ q: this.units.param(`${pre}.self_attn.q_norm.weight`), k: this.units.param(`${pre}.self_attn.k_norm.weight`) });
      if (!this.sparse.has(l)) {
        const P = (n: string) => this.units.param(`${pre}.mlp.${n}.weight`);
        this.dense.push({ gate: P("gate_proj"), up: P("up_proj"), down: P("down_proj") });
        this.moeLayers.push(undefined);
        continue;
      }
      this.dense.push(undefined);
      const row: ExpertParams[] = [];
      for (let e = 0; e < config.num_local_experts; e++) {
        const P = (n: string) => this.units.param(`${pre}.mlp.experts.${e}.${n}.weight`);
        row.push({ unit: this.units.unit(`layers.${l}.experts.${e}`), w1: P("gate_proj"), w2: P("down_proj"), w3: P("up_proj") });
      }
      const gate = this.units.param(`${pre}.mlp.gate.weight`);
      this.moeLayers.push(new MoELayer(l, gate, new GroupedExperts(l, row), config.num_experts_per_tok, this.moe, { normTopkProb: config.norm_topk_prob }));
    }
  }

  protected feedForwardSpecs(layer: number, normal: { kind: "normal"; std: number }): ParamSpec[] {
    const c = this.config;
    const pre = `model.layers.${layer}`;
    const specs: ParamSpec[] = [
      { name: `${pre}.self_attn.q_norm.weight`, shape: [c.head_dim], init: { kind: "ones" } },
      { name: `${pre}.self_attn.k_norm.weight`, shape: [c.head_dim], init: { kind: "ones" } },
    ];
    // called from the base constructor: `this.sparse` is not set yet
    if (moeLayerIndices(c).includes(layer)) {
      specs.push({ name: `${pre}.mlp.gate.weight`, shape: [c.num_local_experts, c.hidden_size], init: normal });
    } else {
      specs.push(
        { name: `${pre}.mlp.gate_proj.weight`, shape: [c.intermediate_size, c.hidden_size], init: normal },
        { name: `${pre}.mlp.up_proj.weight`, shape: [c.intermediate_size, c.hidden_size], init: normal },
        { name: `${pre}.mlp.down_proj.weight`, shape: [c.hidden_size, c.intermediate_size], init: normal },
      );
    }
    return specs;
  }

  protected override addLayerExtras(layer: number, dtypeOf: (name: string, kind: UnitKind) => DType, allocate: boolean, normal: { kind: "normal"; std: number }): void {
    const c = this.config;
    if (!moeLayerIndices(c).includes(layer)) return;
    const I = c.moe_intermediate_size;
    const H = c.hidden_size;
    for (let e = 0; e < c.num_local_experts; e++) {
      const pre = `model.layers.${layer}.mlp.experts.${e}`;
      this.units.add({
        name: `layers.${layer}.experts.${e}`,
        kind: "expert",
        layer,
        expert: e,
        dtype: dtypeOf(`layers.${layer}.experts.${e}`, "expert"),
        allocate,
        params: [
          { name: `${pre}.gate_proj.weight`, shape: [I, H], init: normal },
          { name: `${pre}.up_proj.weight`, shape: [I, H], init: normal },
          { name: `${pre}.down_proj.weight`, shape: [H, I], init: normal },
        ],
      });
    }
  }

  /** Self-attention with per-head q_norm/k_norm before RoPE (module comment); x [B·S, hidden]. */
  private attention(i: number, x: Tensor, B: number, S: number): Tensor {
    const c = this.config;
    const p = this.layerParams[i]!.attn;
    const n = this.qkNorm[i]!;
    const H = c.num_attention_heads;
    const Hkv = c.num_key_value_heads;
    const D = c.head_dim;
    const eps = c.rms_norm_eps;
    const q = rope(reshape(rmsnorm(reshape(linear(x, p.q.tensor), [B * S * H, D]), n.q.tensor, eps), [B, S, H, D]), c.rope_theta);
    const k = rope(reshape(rmsnorm(reshape(linear(x, p.k.tensor), [B * S * Hkv, D]), n.k.tensor, eps), [B, S, Hkv, D]), c.rope_theta);
    const v = reshape(linear(x, p.v.tensor), [B, S, Hkv, D]);
    const o = causalAttention(q, k, v, 1 / Math.sqrt(D));
    return linear(reshape(o, [B * S, H * D]), p.o.tensor);
  }

  protected override async decoderLayer(i: number, h: Tensor, B: number, S: number): Promise<Tensor> {
    const c = this.config;
    const p = this.layerParams[i]!;
    const h2 = add(h, this.attention(i, rmsnorm(h, p.inputNorm.tensor, c.rms_norm_eps), B, S));
    const m = await this.feedForward(i, rmsnorm(h2, p.postNorm.tensor, c.rms_norm_eps));
    return add(h2, m);
  }

  protected async feedForward(layer: number, x: Tensor): Promise<Tensor> {
    const moe = this.moeLayers[layer];
    if (!moe) {
      const d = this.dense[layer]!;
      return swiglu(x, d.gate, d.up, d.down);
    }
    const { output, decision } = await moe.forward(x);
    this.lastBlocks[layer] = { routerProbMean: mean(decision.probs, 0), expertCounts: decision.counts, gateLoss: decision.loss };
    return output;
  }

  protected override layerOutputsToKeep(layer: number): Tensor[] {
    const b = this.lastBlocks[layer];
    if (!b) return [];
    return b.gateLoss ? [b.routerProbMean, b.gateLoss] : [b.routerProbMean];
  }

  protected override adoptLayerOutputs(layer: number, extras: Tensor[]): void {
    const b = this.lastBlocks[layer];
    if (b && extras[0]) b.routerProbMean = extras[0];
    if (b && extras[1]) b.gateLoss = extras[1];
  }

  protected override beginForward(): void {
    this.lastBlocks = [];
    this.lastAuxLoss = null;
  }

  protected override auxLossOfLastForward(): Tensor | null {
    return this.lastAuxLoss;
  }

  /** HF load-balancing loss over the MoE layers of the last forward (module comment), plus the
   * router's per-layer weighted losses. */
  protected override extraLoss(tokens: number): Tensor | null {
    const blocks = this.lastBlocks.filter((b) => b !== undefined);
    const L = blocks.length;
    if (L === 0) return null;
    const E = this.config.num_local_experts;
    let pSum = blocks[0]!.routerProbMean;
    for (let l = 1; l < L; l++) pSum = add(pSum, blocks[l]!.routerProbMean);
    const pMean = scale(pSum, 1 / L);
    const frac = new Float64Array(E);
    for (const b of blocks) for (let e = 0; e < E; e++) frac[e]! += b.expertCounts[e]! / (L * tokens);
    const aux = scale(sum(mul(pMean, fromArray(this.be, frac, [E]))), E);
    this.lastAuxLoss = aux;
    const coef = this.moe.router.mixtralAuxCoef;
    let extra: Tensor | null = coef !== null ? scale(aux, coef) : null;
    for (const b of blocks) if (b.gateLoss) extra = extra ? add(extra, b.gateLoss) : b.gateLoss;
    return extra;
  }

  /** Transformers 5's fused in-memory expert layout (module comment). */
  protected override loadAlternative(p: Parameter, sd: StateDict, used: Set<string>): boolean {
    const m = /^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$/.exec(p.name);
    if (!m) return false;
    const c = this.config;
    const e = Number(m[2]);
    const I = c.moe_intermediate_size;
    const H = c.hidden_size;
    const E = c.num_local_experts;
    const fused = m[3] === "down_proj" ? `model.layers.${m[1]}.mlp.experts.down_proj` : `model.layers.${m[1]}.mlp.experts.gate_up_proj`;
    const t = sd.get(fused);
    if (!t) return false;
    const want = m[3] === "down_proj" ? [E, H, I] : [E, 2 * I, H];
    if (t.shape.join(",") !== want.join(",")) throw new Error(`loadStateDict: ${fused} has shape [${t.shape.join(", ")}], expected [${want.join(", ")}]`);
    const off = m[3] === "down_proj" ? e * H * I : e * 2 * I * H + (m[3] === "up_proj" ? I * H : 0);
    writeParam(p, t, off, `loadStateDict(${fused})`);
    used.add(fused);
    return true;
  }
}
