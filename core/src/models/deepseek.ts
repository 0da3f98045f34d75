/**
 * DeepSeek-V3 (`DeepseekV3ForCausalLM`, DeepSeek-AI 2024) and DeepSeek-V2 (`DeepseekV2ForCausalLM`,
 * DeepSeek-AI 2024) with Hugging Face Transformers 5.17's semantics and parameter names:
 *
 *   attention: multi-head latent attention (mla-attention.ts)
 *   feed-forward of layer l: a dense SwiGLU of intermediate_size when l < first_k_dense_replace,
 *              else routed experts (`mlp.experts.{e}`, moe_intermediate_size) + shared experts
 *              (`mlp.shared_experts`, one SwiGLU of moe_intermediate_size · n_shared_experts)
 *   routing (nn/moe/router.ts building blocks, on the MoELayer straight line):
 *     V3: s = sigmoid(gate(x)) in f32; the choice uses s + e_score_correction_bias with the
 *         group limit (n_group groups scored by the sum of their two best, topk_group kept);
 *         weights = s of the chosen (renormalised when norm_topk_prob) · routed_scaling_factor
 *     V2: p = softmax(gate(x)) in f32; topk_method "greedy" (top-k) or "group_limited_greedy"
 *         (groups scored by their best expert); weights = p of the chosen · routed_scaling_factor
 *   loss:      cross-entropy only (Transformers' DeepSeek adds no load-balancing loss)
 *
 * `e_score_correction_bias` is not a trained parameter (a buffer in Transformers): each V3 MoE
 * layer keeps it as a host array, `selectionBias` of its routing, read from a state dict by
 * `loadStateDict` and written by `stateDict` (model.layers.{l}.mlp.gate.e_score_correction_bias).
 */
import type { Backend } from "@zeromoe/kernels";
import type { DeepseekV2Config, DeepseekV3Config } from "../config/types.ts";
import type { MoELayerRouting } from "../nn/moe/layer.ts";
import type { StateDict } from "../nn/state-dict.ts";
import type { Parameter, ParamSpec } from "../nn/unit.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { swiglu, type ModelOptions } from "./llama.ts";
import { deepseekSoftmaxMscale, ropeAttentionFactor, ropeFreqOf } from "./rope-scaling.ts";
import { mlaParams, mlaSpecs, multiHeadLatentAttention, type MLAParams, type MLAShape } from "./mla-attention.ts";
import { SparseMoEDecoder } from "./sparse-moe-decoder.ts";

type DeepseekConfig = DeepseekV3Config | DeepseekV2Config;

/** The MLA shape of a DeepSeek config. */
function mlaShape(c: DeepseekConfig): MLAShape {
  return {
    hidden: c.hidden_size, heads: c.num_attention_heads, qLoraRank: c.q_lora_rank, kvLoraRank: c.kv_lora_rank,
    qkNope: c.qk_nope_head_dim, qkRope: c.qk_rope_head_dim, v: c.v_head_dim, eps: c.rms_norm_eps,
    ropeFreq: (positions: number) => ropeFreqOf(c, positions), ropeFactor: ropeAttentionFactor(c), softmaxMscale: deepseekSoftmaxMscale(c),
    interleave: c.model_type === "deepseek_v2" || c.rope_interleave,
  };
}

/** What DeepSeek-V2 and V3 share (module comment). */
abstract class DeepseekDecoder<C extends DeepseekConfig> extends SparseMoEDecoder<C> {
  private readonly mla: MLAParams[] = [];
  private readonly shared: ({ gate: Parameter; up: Parameter; down: Parameter } | undefined)[] = [];

  constructor(be: Backend, config: C, opts: ModelOptions = {}) {
    super(be, config, opts);
    const shape = mlaShape(config);
    for (let l = 0; l < config.num_hidden_layers; l++) {
      const pre = `model.layers.${l}`;
      this.mla.push(mlaParams(this.units, pre, shape));
      const P = (n: string) => this.units.param(`${pre}.mlp.shared_experts.${n}.weight`);
      this.shared.push(this.moeLayers[l] && (config.n_shared_experts ?? 0) > 0 ? { gate: P("gate_proj"), up: P("up_proj"), down: P("down_proj") } : undefined);
    }
  }

  protected override attentionSpecs(layer: number, normal: { kind: "normal"; std: number }): ParamSpec[] {
    return mlaSpecs(`model.layers.${layer}`, mlaShape(this.config), normal);
  }

  protected familyLayerSpecs(layer: number, sparse: boolean, normal: { kind: "normal"; std: number }): ParamSpec[] {
    const c = this.config;
    const n = c.n_shared_experts ?? 0;
    if (!sparse || n === 0) return [];
    const I = c.moe_intermediate_size * n;
    const H = c.hidden_size;
    const pre = `model.layers.${layer}.mlp.shared_experts`;
    return [
      { name: `${pre}.gate_proj.weight`, shape: [I, H], init: normal },
      { name: `${pre}.up_proj.weight`, shape: [I, H], init: normal },
      { name: `${pre}.down_proj.weight`, shape: [H, I], init: normal },
    ];
  }

  protected attention(i: number, x: Tensor, B: number, S: number): Tensor {
    return multiHeadLatentAttention(x, this.mla[i]!, mlaShape(this.config), B, S);
  }

  /** The shared experts on the MoE layer's input, added to the routed output. */
  protected override sharedOutput(layer: number, x: Tensor): Tensor | null {
    const s = this.shared[layer];
    return s ? swiglu(x, s.gate, s.up, s.down) : null;
  }
}

/** `DeepseekV3ForCausalLM` (module comment). */
export class DeepseekV3ForCausalLM extends DeepseekDecoder<DeepseekV3Config> {
  protected override layerRouting(_layer: number): MoELayerRouting {
    const c = this.config;
    return {
      scoreFunc: "sigmoid",
      selectionBias: new Float32Array(c.num_local_experts),
      groupLimit: { numGroups: c.n_group!, topkGroups: c.topk_group!, groupScore: "top2_sum" },
      routedScalingFactor: c.routed_scaling_factor,
    };
  }

  /** e_score_correction_bias of MoE layer `layer` (the live array routing reads), or null. */
  expertBias(layer: number): Float32Array | null {
    return this.moeLayers[layer]?.routing.selectionBias ?? null;
  }

  /** Parameters by HF name, plus each MoE layer's `mlp.gate.e_score_correction_bias` when present
   * (absent: the bias stays as it is, zeros at construction). @throws on a bias of the wrong length. */
  override loadStateDict(sd: StateDict, opts: { strict?: boolean } = {}): void {
    const rest: StateDict = new Map(sd);
    for (let l = 0; l < this.config.num_hidden_layers; l++) {
      const name = `model.layers.${l}.mlp.gate.e_score_correction_bias`;
      const t = rest.get(name);
      if (!t) continue;
      rest.delete(name);
      const bias = this.expertBias(l);
      if (!bias) throw new Error(`loadStateDict: ${name} given, but layer ${l} has no experts (first_k_dense_replace ${this.config.first_k_dense_replace})`);
      if (t.dtype !== "f32") throw new Error(`loadStateDict: ${name} has dtype ${t.dtype}, expected f32`);
      if (t.data.length !== bias.length) throw new Error(`loadStateDict: ${name} has ${t.data.length} values, the layer has ${bias.length} experts`);
      bias.set(t.data as Float32Array);
    }
    super.loadStateDict(rest, opts);
  }

  /** Each MoE layer's `mlp.gate.e_score_correction_bias` (the live arrays). */
  override buffers(): Map<string, Float32Array> {
    const out = new Map<string, Float32Array>();
    for (let l = 0; l < this.config.num_hidden_layers; l++) {
      const bias = this.expertBias(l);
      if (bias) out.set(`model.layers.${l}.mlp.gate.e_score_correction_bias`, bias);
    }
    return out;
  }

  override async stateDict(): Promise<StateDict> {
    const sd = await super.stateDict();
    for (const [name, b] of this.buffers()) sd.set(name, { shape: [b.length], dtype: "f32", data: Float32Array.from(b) });
    return sd;
  }
}

/** `DeepseekV2ForCausalLM` (module comment). */
export class DeepseekV2ForCausalLM extends DeepseekDecoder<DeepseekV2Config> {
  protected override layerRouting(_layer: number): MoELayerRouting {
    const c = this.config;
    return {
      scoreFunc: "softmax",
      groupLimit: c.topk_method === "group_limited_greedy" ? { numGroups: c.n_group!, topkGroups: c.topk_group!, groupScore: "max" } : null,
      routedScalingFactor: c.routed_scaling_factor,
    };
  }
}
