/**
 * The part the Qwen-style sparse families share (Qwen3-MoE, Qwen2-MoE, and DeepSeek-V2/V3 with their
 * own attention and routing; Hugging Face Transformers 5.17 semantics and parameter names), on the
 * Llama decoder (llama.ts `CausalDecoder`):
 *
 *   feed-forward of layer l: experts when l is an MoE layer (config/moe-shape.ts `moeLayerIndices`),
 *              else a dense SwiGLU MLP of intermediate_size (`model.layers.{l}.mlp.{gate,up,down}_proj`)
 *   MoE block: router_logits = gate(x) [T, E]; p = softmax(router_logits) in f32; top-k by p;
 *              weights = p of the chosen (renormalised to sum 1 when norm_topk_prob);
 *              out = Σ w_i · down_i(silu(gate_i x) ⊙ up_i x)   (moe_intermediate_size)
 *              + the family's shared part ({@link SparseMoEDecoder.sharedOutput}; Qwen2-MoE's shared expert)
 *   aux loss:  HF `load_balancing_loss_func` over the MoE layers' router logits concatenated
 *              (as Mixtral, models/mixtral.ts, with L = the number of MoE layers); added with
 *              router_aux_loss_coef when output_router_logits.
 *
 * Each MoE layer is an `MoELayer` (nn/moe/layer.ts: router → dispatcher → GroupedExperts →
 * combine) with the model's shared `moe` parts, so the route hook (the moe plugin: expert
 * parallelism, DeepSpeed router options) and AutoEP apply unchanged. Expert e of layer l is the
 * unit `layers.{l}.experts.{e}` holding `model.layers.{l}.mlp.experts.{e}.{gate,up,down}_proj.weight`
 * (the Hub layout save_pretrained writes); the router `model.layers.{l}.mlp.gate.weight` lives in
 * the layer unit. Transformers 5's fused in-memory layout (`mlp.experts.gate_up_proj` [E, 2·I, H],
 * `mlp.experts.down_proj` [E, H, I]) is read by `loadStateDict` (and by `--init-from`,
 * checkpoint/hub-layouts.ts).
 */
import type { Backend, DType } from "@zeromoe/kernels";
import { moeLayerIndices } from "../config/moe-shape.ts";
import type { DeepseekV2Config, DeepseekV3Config, Qwen2MoeConfig, Qwen3MoeConfig } from "../config/types.ts";
import { LocalDispatcher } from "../nn/moe/dispatcher.ts";
import { GroupedExperts, type ExpertParams } from "../nn/moe/experts.ts";
import { expertParamName, expertUnitName } from "../nn/moe/expert-slice.ts";
import { addExpertUnits } from "../nn/moe/expert-units.ts";
import { MoELayer, type MoELayerRouting, type MoEParts } from "../nn/moe/layer.ts";
import { TopKRouter } from "../nn/moe/router.ts";
import { writeParam, type StateDict } from "../nn/state-dict.ts";
import type { Parameter, ParamSpec, UnitKind } from "../nn/unit.ts";
import { add, rmsnorm } from "../tensor/index.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { CausalDecoder, swiglu, type ModelOptions } from "./llama.ts";
import { adoptBlockTensors, blockTensorsToKeep, moeBlockRecord, moeExtraLoss, type MoEBlockRecord } from "./moe-block-record.ts";

export type { MoEBlockRecord } from "./moe-block-record.ts";

/** Configs of the families built on this class (Qwen3-MoE, Qwen2-MoE, DeepSeek-V2/V3). */
export type QwenMoeConfig = Qwen3MoeConfig | Qwen2MoeConfig | DeepseekV3Config | DeepseekV2Config;

/** Base of the Qwen-style sparse decoders (module comment). */
export abstract class SparseMoEDecoder<C extends QwenMoeConfig> extends CausalDecoder<C> {
  override readonly moe: MoEParts;
  /** The MoE layer of each decoder layer with experts (undefined for dense layers). */
  readonly moeLayers: (MoELayer | undefined)[] = [];
  /** Per MoE layer of the last forward (undefined for dense layers). */
  lastBlocks: (MoEBlockRecord | undefined)[] = [];
  /** The load-balancing loss of the last forward (before the coefficient), or null. */
  lastAuxLoss: Tensor | null = null;
  private readonly dense: ({ gate: Parameter; up: Parameter; down: Parameter } | undefined)[] = [];

  constructor(be: Backend, config: C, opts: ModelOptions = {}) {
    super(be, config, opts);
    const sparse = new Set(moeLayerIndices(config));
    this.moe = { router: new TopKRouter(config.output_router_logits ? config.router_aux_loss_coef : null), dispatcher: new LocalDispatcher() };
    for (let l = 0; l < config.num_hidden_layers; l++) {
      const pre = `model.layers.${l}`;
      if (!sparse.has(l)) {
        const P = (n: string) => this.units.param(`${pre}.mlp.${n}.weight`);
        this.dense.push({ gate: P("gate_proj"), up: P("up_proj"), down: P("down_proj") });
        this.moeLayers.push(undefined);
        continue;
      }
      this.dense.push(undefined);
      const row: ExpertParams[] = [];
      for (let e = 0; e < config.num_local_experts; e++) {
        const P = (n: string) => this.units.param(expertParamName(`${pre}.mlp.experts.${e}.${n}.weight`, this.expertSlice));
        row.push({ unit: this.units.unit(expertUnitName(l, e, this.expertSlice)), w1: P("gate_proj"), w2: P("down_proj"), w3: P("up_proj") });
      }
      const gate = this.units.param(`${pre}.mlp.gate.weight`);
      this.moeLayers.push(new MoELayer(l, gate, new GroupedExperts(l, row), config.num_experts_per_tok, this.moe, { normTopkProb: config.norm_topk_prob, routing: this.layerRouting(l) }));
    }
  }

  /** The family's parameters of layer `layer`'s unit besides attention, norms and the feed-forward
   * (Qwen3-MoE's q_norm/k_norm, Qwen2-MoE's biases and shared expert). Called from the base
   * constructor: only `this.config` may be read. */
  protected abstract familyLayerSpecs(layer: number, sparse: boolean, normal: { kind: "normal"; std: number }): ParamSpec[];

  /** The family's routing of MoE layer `layer` beyond softmax top-k (DeepSeek: sigmoid scores,
   * selection bias, group limit, routed scaling factor); {} by default. Called from the
   * constructor: only `this.config` may be read. */
  protected layerRouting(_layer: number): MoELayerRouting {
    return {};
  }

  /** The family's self-attention of layer `i` on normed x [B·S, hidden] → [B·S, hidden]. */
  protected abstract attention(i: number, x: Tensor, B: number, S: number): Tensor;

  /** One pre-norm decoder layer: h + attention(norm(h)), then + feed-forward(norm(·)). */
  protected override async decoderLayer(i: number, h: Tensor, B: number, S: number): Promise<Tensor> {
    const c = this.config;
    const p = this.layerParams[i]!;
    const h2 = add(h, this.attention(i, rmsnorm(h, p.inputNorm.tensor, c.rms_norm_eps), B, S));
    const m = await this.feedForward(i, rmsnorm(h2, p.postNorm.tensor, c.rms_norm_eps));
    return add(h2, m);
  }

  /** The family's output added to the routed experts' in MoE layer `layer` on normed x [T, hidden]
   * (Qwen2-MoE's gated shared expert), or null. */
  protected sharedOutput(_layer: number, _x: Tensor): Tensor | null {
    return null;
  }

  protected feedForwardSpecs(layer: number, normal: { kind: "normal"; std: number }): ParamSpec[] {
    const c = this.config;
    const pre = `model.layers.${layer}`;
    // called from the base constructor: instance fields are not set yet
    const sparse = moeLayerIndices(c).includes(layer);
    const specs: ParamSpec[] = this.familyLayerSpecs(layer, sparse, normal);
    if (sparse) {
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
    addExpertUnits(this.units, {
      layer,
      numExperts: c.num_local_experts,
      names: (e) => {
        const pre = `model.layers.${layer}.mlp.experts.${e}`;
        return { gate: `${pre}.gate_proj.weight`, down: `${pre}.down_proj.weight`, up: `${pre}.up_proj.weight` };
      },
      order: ["gate", "up", "down"],
      intermediate: c.moe_intermediate_size,
      hidden: c.hidden_size,
      std: normal.std,
      slice: this.expertSlice,
      dtypeOf,
      allocate,
    });
  }

  protected async feedForward(layer: number, x: Tensor): Promise<Tensor> {
    const moe = this.moeLayers[layer];
    if (!moe) {
      const d = this.dense[layer]!;
      return swiglu(x, d.gate, d.up, d.down);
    }
    const { output, decision } = await moe.forward(x);
    this.lastBlocks[layer] = moeBlockRecord(x.be, decision, this.config.num_local_experts, x.shape[0]!);
    const shared = this.sharedOutput(layer, x);
    return shared ? add(output, shared) : output;
  }

  protected override layerOutputsToKeep(layer: number): Tensor[] {
    return blockTensorsToKeep(this.lastBlocks[layer]);
  }

  protected override adoptLayerOutputs(layer: number, extras: Tensor[]): void {
    adoptBlockTensors(this.lastBlocks[layer], extras);
  }

  protected override beginForward(): void {
    this.lastBlocks = [];
    this.lastAuxLoss = null;
  }

  protected override auxLossOfLastForward(): Tensor | null {
    return this.lastAuxLoss;
  }

  /** HF load-balancing loss over the MoE layers of the last forward (module comment; computed by
   * moe-block-record.ts moeExtraLoss: fractions on the device or read once), plus the router's
   * per-layer weighted losses. */
  protected override async extraLoss(tokens: number): Promise<Tensor | null> {
    const blocks = this.lastBlocks.filter((b) => b !== undefined);
    if (blocks.length === 0) return null;
    const { aux, extra } = await moeExtraLoss(this.be, blocks, this.config.num_local_experts, tokens, this.moe.router.mixtralAuxCoef);
    this.lastAuxLoss = aux;
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
