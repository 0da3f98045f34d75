/**
 * Qwen2-MoE (`Qwen2MoeForCausalLM`, Qwen Team 2024) with Hugging Face Transformers 5.17's
 * semantics and parameter names: the Llama decoder (llama.ts `CausalDecoder`) with
 *
 *   attention: q = rope(q_proj(n) + q_bias), k = rope(k_proj(n) + k_bias), v = v_proj(n) + v_bias
 *              (biases `self_attn.{q,k,v}_proj.bias` when qkv_bias; o_proj has none)
 *   feed-forward of layer l: experts when l ∉ mlp_only_layers and (l + 1) % decoder_sparse_step == 0
 *              (config/moe-shape.ts), else a dense SwiGLU MLP of intermediate_size
 *   MoE block: the Qwen-style routed experts of sparse-moe-decoder.ts (softmax in f32, top-k,
 *              renormalised only when norm_topk_prob, moe_intermediate_size) plus the shared expert
 *              s(x) = sigmoid(shared_expert_gate(x)) · down_s(silu(gate_s x) ⊙ up_s x)
 *              (`mlp.shared_expert.{gate,up,down}_proj.weight` of shared_expert_intermediate_size,
 *              `mlp.shared_expert_gate.weight` [1, hidden]); out = routed + s(x)
 *   aux loss:  HF `load_balancing_loss_func` over the MoE layers (sparse-moe-decoder.ts).
 *
 * The shared expert and its gate live in the layer unit (dense: every rank holds them and their
 * gradients are summed over dp, like the router); the routed experts are the units
 * `layers.{l}.experts.{e}` (expert parallelism, AutoEP).
 */
import type { Backend } from "@zeromoe/kernels";
import type { Qwen2MoeConfig } from "../config/types.ts";
import type { Parameter, ParamSpec } from "../nn/unit.ts";
import { add, causalAttention, linear, mul, reshape, rope, sigmoid } from "../tensor/index.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { attentionScale, swiglu, type ModelOptions } from "./llama.ts";
import { SparseMoEDecoder } from "./sparse-moe-decoder.ts";
import { ropeFreqOf } from "./rope-scaling.ts";

/** The shared expert of one MoE layer. */
interface SharedExpert {
  gate: Parameter;
  up: Parameter;
  down: Parameter;
  /** shared_expert_gate [1, hidden]. */
  scale: Parameter;
}

/** `Qwen2MoeForCausalLM` (module comment). */
export class Qwen2MoeForCausalLM extends SparseMoEDecoder<Qwen2MoeConfig> {
  private readonly bias: ({ q: Parameter; k: Parameter; v: Parameter } | null)[] = [];
  private readonly shared: (SharedExpert | undefined)[] = [];

  constructor(be: Backend, config: Qwen2MoeConfig, opts: ModelOptions = {}) {
    super(be, config, opts);
    for (let l = 0; l < config.num_hidden_layers; l++) {
      const pre = `model.layers.${l}`;
      const P = (n: string) => this.units.param(`${pre}.${n}`);
      this.bias.push(config.qkv_bias ? { q: P("self_attn.q_proj.bias"), k: P("self_attn.k_proj.bias"), v: P("self_attn.v_proj.bias") } : null);
      this.shared.push(this.moeLayers[l]
        ? { gate: P("mlp.shared_expert.gate_proj.weight"), up: P("mlp.shared_expert.up_proj.weight"), down: P("mlp.shared_expert.down_proj.weight"), scale: P("mlp.shared_expert_gate.weight") }
        : undefined);
    }
  }

  protected familyLayerSpecs(layer: number, sparse: boolean, normal: { kind: "normal"; std: number }): ParamSpec[] {
    const c = this.config;
    const pre = `model.layers.${layer}`;
    const H = c.hidden_size;
    const D = c.head_dim;
    const specs: ParamSpec[] = [];
    if (c.qkv_bias) {
      // nn.Linear's bias init in HF's _init_weights: zeros
      specs.push(
        { name: `${pre}.self_attn.q_proj.bias`, shape: [c.num_attention_heads * D], init: { kind: "zeros" } },
        { name: `${pre}.self_attn.k_proj.bias`, shape: [c.num_key_value_heads * D], init: { kind: "zeros" } },
        { name: `${pre}.self_attn.v_proj.bias`, shape: [c.num_key_value_heads * D], init: { kind: "zeros" } },
      );
    }
    if (sparse) {
      const I = c.shared_expert_intermediate_size;
      specs.push(
        { name: `${pre}.mlp.shared_expert.gate_proj.weight`, shape: [I, H], init: normal },
        { name: `${pre}.mlp.shared_expert.up_proj.weight`, shape: [I, H], init: normal },
        { name: `${pre}.mlp.shared_expert.down_proj.weight`, shape: [H, I], init: normal },
        { name: `${pre}.mlp.shared_expert_gate.weight`, shape: [1, H], init: normal },
      );
    }
    return specs;
  }

  /** sigmoid(shared_expert_gate(x)) · shared_expert(x), x [T, hidden] (module comment). */
  protected override sharedOutput(layer: number, x: Tensor): Tensor | null {
    const s = this.shared[layer];
    if (!s) return null;
    return mul(sigmoid(linear(x, s.scale.tensor)), swiglu(x, s.gate, s.up, s.down));
  }

  /** Self-attention with q/k/v biases (module comment); x [B·S, hidden]. */
  protected attention(i: number, x: Tensor, B: number, S: number): Tensor {
    const c = this.config;
    const p = this.layerParams[i]!.attn!;
    const b = this.bias[i];
    const H = c.num_attention_heads;
    const Hkv = c.num_key_value_heads;
    const D = c.head_dim;
    const proj = (w: Parameter, bias: Parameter | undefined) => (bias ? add(linear(x, w.tensor), bias.tensor) : linear(x, w.tensor));
    const q = rope(reshape(proj(p.q, b?.q), [B, S, H, D]), ropeFreqOf(c, S));
    const k = rope(reshape(proj(p.k, b?.k), [B, S, Hkv, D]), ropeFreqOf(c, S));
    const v = reshape(proj(p.v, b?.v), [B, S, Hkv, D]);
    const o = causalAttention(q, k, v, attentionScale(c));
    return linear(reshape(o, [B * S, H * D]), p.o.tensor);
  }
}
