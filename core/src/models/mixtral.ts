/**
 * Mixtral (`MixtralForCausalLM`, Jiang et al. 2024): Llama (llama.ts) with every feed-forward
 * replaced by a sparse Mixture-of-Experts block, with Hugging Face's semantics (docs/domain.md §4):
 *
 *   router_logits = gate(x)                      [T, E]   (model.layers.{l}.block_sparse_moe.gate.weight)
 *   p = softmax(router_logits) in f32 over all E experts
 *   top-k experts per token by p; weights = their p renormalised to sum 1
 *   out = Σ_i w_i · expert_i(x),  expert = w2(silu(w1 x) ⊙ w3 x)   (no capacity, no dropping)
 *
 * Each layer's block is an `MoELayer` (nn/moe/layer.ts), one straight line: router.gating →
 * router.routing → dispatcher.dispatch → experts(rows, tokens_per_expert) → dispatcher.combine.
 * The router and the dispatcher are `model.moe` (shared by all layers): by default Hugging Face's
 * router (nn/moe/router.ts `TopKRouter`, the formulas above) and the local dispatcher (every expert
 * on this rank); the route hook replaces them (the MoE plugin: all_to_all_v expert parallelism,
 * DeepSpeed's router options — capacity, drops, Switch/GShard aux, z-loss, noise, clamping). Each
 * block returns DeepSpeed-style (output, aux-loss inputs, expert counts); a router's per-layer
 * weighted losses are added to the training loss, and the HF load-balancing loss below is added with
 * `router.mixtralAuxCoef` (the default router: `router_aux_loss_coef` when `output_router_logits`).
 *
 * Load-balancing loss (HF `load_balancing_loss_func`, Switch Transformer eq. 4–6 as HF computes it):
 * router probabilities of ALL layers are treated as one [L·T, E] matrix;
 * aux = E · Σ_e (n_e / (L·T)) · mean_rows(p_e), n_e = number of top-k picks of expert e over all
 * layers (Σ n_e = k·L·T). Only p carries a gradient. As in HF, `router_aux_loss_coef · aux` is added
 * to the loss when `config.output_router_logits` is true; `lastAuxLoss` always holds aux.
 *
 * Units: `embed`, then per layer `layers.{l}` (attention, norms, router) followed by one `expert`
 * unit per expert, `layers.{l}.experts.{e}` (w1, w2, w3), entered inside the layer's region only
 * while that expert runs; finally `head`. Expert units are partitioned over the edp group by the
 * engine; the MoE plugin may destroy the units of experts another rank holds.
 *
 * State dicts: Hub layout (`block_sparse_moe.experts.{e}.w1.weight`, …) is what `stateDict()`
 * returns (or Transformers 5's fused in-memory layout with `{layout: "fused"}`); `loadStateDict`
 * accepts both: fused `model.layers.{l}.mlp.gate.weight` [E, hidden],
 * `mlp.experts.gate_up_proj` [E, 2·I, hidden] (rows 0..I−1 = w1, I..2I−1 = w3) and
 * `mlp.experts.down_proj` [E, hidden, I] (= w2).
 */
import type { Backend, DType } from "@zeromoe/kernels";
import { initUnit } from "../nn/init.ts";
import { LocalDispatcher } from "../nn/moe/dispatcher.ts";
import { GroupedExperts, type ExpertParams } from "../nn/moe/experts.ts";
import { expertParamName, expertUnitName } from "../nn/moe/expert-slice.ts";
import { addExpertUnits } from "../nn/moe/expert-units.ts";
import { MoELayer, type MoEParts } from "../nn/moe/layer.ts";
import { TopKRouter } from "../nn/moe/router.ts";
import { readParam, writeParam, type StateDict, type StateTensor } from "../nn/state-dict.ts";
import type { Parameter, ParamSpec, Unit, UnitKind } from "../nn/unit.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { MixtralConfig } from "../config/types.ts";
import { CausalDecoder, type ModelOptions } from "./llama.ts";
import { adoptBlockTensors, blockTensorsToKeep, moeBlockRecord, moeExtraLoss, type MoEBlockRecord } from "./moe-block-record.ts";

/** What one MoE block returns (DeepSpeed's (output, l_aux, exp_counts)): the layer's record
 * (moe-block-record.ts: mean router probability [E], differentiable; the picks per expert, Σ = k·T
 * before any capacity drop, on the host or the device; the gate's weighted loss) and its output. */
export interface MoEBlockOutput extends MoEBlockRecord {
  /** [T, hidden]. */
  output: Tensor;
}

/** `MixtralForCausalLM`. */
export class MixtralForCausalLM extends CausalDecoder<MixtralConfig> {
  /** The router and token dispatcher of every MoE layer (the route hook replaces them). Default:
   * Hugging Face's router and the local dispatcher. */
  override readonly moe: MoEParts;
  /** Per-layer block outputs' statistics from the last forward. */
  lastBlocks: MoEBlockRecord[] = [];
  /** The load-balancing loss of the last forward (before the coefficient), or null. */
  lastAuxLoss: Tensor | null = null;
  /** The MoE layer of each decoder layer. */
  readonly moeLayers: MoELayer[] = [];

  constructor(be: Backend, config: MixtralConfig, opts: ModelOptions = {}) {
    super(be, config, opts);
    this.moe = { router: new TopKRouter(config.output_router_logits ? config.router_aux_loss_coef : null), dispatcher: new LocalDispatcher() };
    for (let l = 0; l < config.num_hidden_layers; l++) {
      const row: ExpertParams[] = [];
      for (let e = 0; e < config.num_local_experts; e++) {
        const P = (n: string) => this.units.param(expertParamName(`model.layers.${l}.block_sparse_moe.experts.${e}.${n}.weight`, this.expertSlice));
        row.push({ unit: this.units.unit(expertUnitName(l, e, this.expertSlice)), w1: P("w1"), w2: P("w2"), w3: P("w3") });
      }
      const gate = this.units.param(`model.layers.${l}.block_sparse_moe.gate.weight`);
      this.moeLayers.push(new MoELayer(l, gate, new GroupedExperts(l, row), config.num_experts_per_tok, this.moe));
    }
  }

  protected feedForwardSpecs(layer: number, normal: { kind: "normal"; std: number }): ParamSpec[] {
    const c = this.config;
    return [{ name: `model.layers.${layer}.block_sparse_moe.gate.weight`, shape: [c.num_local_experts, c.hidden_size], init: normal }];
  }

  protected override addLayerExtras(layer: number, dtypeOf: (name: string, kind: UnitKind) => DType, allocate: boolean, normal: { kind: "normal"; std: number }): void {
    const c = this.config;
    addExpertUnits(this.units, {
      layer,
      numExperts: c.num_local_experts,
      names: (e) => {
        const pre = `model.layers.${layer}.block_sparse_moe.experts.${e}`;
        return { gate: `${pre}.w1.weight`, down: `${pre}.w2.weight`, up: `${pre}.w3.weight` };
      },
      order: ["gate", "down", "up"],
      intermediate: c.intermediate_size,
      hidden: c.hidden_size,
      std: normal.std,
      slice: this.expertSlice,
      dtypeOf,
      allocate,
    });
  }

  /** The expert units of layer `layer`, in expert order. */
  expertUnits(layer: number): Unit[] {
    return this.moeLayers[layer]!.experts.units();
  }

  protected override layerOutputsToKeep(layer: number): Tensor[] {
    return blockTensorsToKeep(this.lastBlocks[layer]);
  }

  protected override beginForward(): void {
    this.lastBlocks = [];
    this.lastAuxLoss = null;
  }

  protected async feedForward(layer: number, x: Tensor): Promise<Tensor> {
    const { output, ...record } = await this.sparseMoeBlock(layer, x);
    this.lastBlocks[layer] = record;
    return output;
  }

  protected override adoptLayerOutputs(layer: number, extras: Tensor[]): void {
    adoptBlockTensors(this.lastBlocks[layer], extras);
  }

  /** The sparse MoE block of layer `layer` on normed x [T, hidden] (see the module comment). */
  async sparseMoeBlock(layer: number, x: Tensor): Promise<MoEBlockOutput> {
    const { output, decision: d } = await this.moeLayers[layer]!.forward(x);
    return { output, ...moeBlockRecord(x.be, d, this.config.num_local_experts, x.shape[0]!) };
  }

  protected override auxLossOfLastForward(): Tensor | null {
    return this.lastAuxLoss;
  }

  /** HF load-balancing loss over all layers of the last forward (module comment), through
   * moe-block-record.ts moeExtraLoss and aux-fractions.ts loadBalancingLoss: the token fractions stay on the device where every layer
   * counted its picks there (no host read, the host records the backward while the GPU still runs
   * the forward; the layers' host `expertCounts` then stay null); else the counts the routers kept
   * on the device are read, all layers in one read (router.ts readCounts). */
  protected override async extraLoss(tokens: number): Promise<Tensor | null> {
    if (this.lastBlocks.length === 0) return null;
    const { aux, extra } = await moeExtraLoss(this.be, this.lastBlocks, this.config.num_local_experts, tokens, this.moe.router.mixtralAuxCoef);
    this.lastAuxLoss = aux;
    return extra;
  }

  /** Accept Transformers 5's fused names for the router and experts. */
  protected override loadAlternative(p: Parameter, sd: StateDict, used: Set<string>): boolean {
    const c = this.config;
    const I = c.intermediate_size;
    let m = /^model\.layers\.(\d+)\.block_sparse_moe\.gate\.weight$/.exec(p.name);
    if (m) {
      const name = `model.layers.${m[1]}.mlp.gate.weight`;
      const t = sd.get(name);
      if (!t) return false;
      expectShape(t, [c.num_local_experts, c.hidden_size], name);
      writeParam(p, t, 0, `loadStateDict(${name})`);
      used.add(name);
      return true;
    }
    m = /^model\.layers\.(\d+)\.block_sparse_moe\.experts\.(\d+)\.(w1|w2|w3)\.weight$/.exec(p.name);
    if (!m) return false;
    const l = m[1];
    const e = Number(m[2]);
    const w = m[3];
    const H = c.hidden_size;
    if (w === "w2") {
      const name = `model.layers.${l}.mlp.experts.down_proj`;
      const t = sd.get(name);
      if (!t) return false;
      expectShape(t, [c.num_local_experts, H, I], name);
      writeParam(p, t, e * H * I, `loadStateDict(${name})`);
      used.add(name);
      return true;
    }
    const name = `model.layers.${l}.mlp.experts.gate_up_proj`;
    const t = sd.get(name);
    if (!t) return false;
    expectShape(t, [c.num_local_experts, 2 * I, H], name);
    writeParam(p, t, e * 2 * I * H + (w === "w3" ? I * H : 0), `loadStateDict(${name})`);
    used.add(name);
    return true;
  }

  /** State dict in the Hub layout (default) or Transformers 5's fused in-memory layout. */
  override async stateDict(opts: { layout?: "hub" | "fused" } = {}): Promise<StateDict> {
    if ((opts.layout ?? "hub") === "hub") return super.stateDict();
    const c = this.config;
    const E = c.num_local_experts;
    const I = c.intermediate_size;
    const H = c.hidden_size;
    const sd: StateDict = new Map();
    const skip = /\.block_sparse_moe\./;
    for (const p of this.parameters()) if (!skip.test(p.name)) sd.set(p.name, await readParam(p));
    for (let l = 0; l < c.num_hidden_layers; l++) {
      sd.set(`model.layers.${l}.mlp.gate.weight`, await readParam(this.moeLayers[l]!.gate));
      const P = (e: number, w: string) => this.units.param(`model.layers.${l}.block_sparse_moe.experts.${e}.${w}.weight`);
      const parts: StateTensor[] = [];
      for (let e = 0; e < E; e++) parts.push(await readParam(P(e, "w1")), await readParam(P(e, "w3")));
      sd.set(`model.layers.${l}.mlp.experts.gate_up_proj`, stack(parts, [E, 2 * I, H]));
      const downs: StateTensor[] = [];
      for (let e = 0; e < E; e++) downs.push(await readParam(P(e, "w2")));
      sd.set(`model.layers.${l}.mlp.experts.down_proj`, stack(downs, [E, H, I]));
    }
    return sd;
  }

  /** Re-initialise every unit from the seed (HF init: normal(0, initializer_range), norms 1). */
  reinitialize(seed = this.seed): void {
    for (const u of this.units.units) initUnit(u, seed);
  }
}

function expectShape(t: StateTensor, shape: number[], name: string): void {
  if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    throw new Error(`loadStateDict: ${name} has shape [${t.shape.join(", ")}], expected [${shape.join(", ")}]`);
  }
}

/** Concatenate host tensors of one dtype into one of `shape`. */
function stack(parts: StateTensor[], shape: number[]): StateTensor {
  const n = parts.reduce((s, p) => s + p.data.length, 0);
  const first = parts[0]!;
  const Ctor = first.data.constructor as { new (n: number): StateTensor["data"] };
  const data = new Ctor(n);
  let off = 0;
  for (const p of parts) {
    (data as Float32Array).set(p.data as Float32Array, off);
    off += p.data.length;
  }
  return { dtype: first.dtype, shape, data };
}
