/**
 * Qwen3-MoE (`Qwen3MoeForCausalLM`, Qwen Team 2025) with Hugging Face Transformers 5.17's semantics
 * and parameter names: the Llama decoder (llama.ts `CausalDecoder`) with
 *
 *   attention: q = rope(q_norm(q_proj(n)) per head), k = rope(k_norm(k_proj(n)) per head), v = v_proj(n)
 *              (q_norm / k_norm: RMSNorm over head_dim, weight [head_dim], before RoPE; head_dim is
 *              its own key, not necessarily hidden_size / num_attention_heads)
 *   feed-forward of layer l: experts when l ∉ mlp_only_layers and (l + 1) % decoder_sparse_step == 0
 *              (config/moe-shape.ts), else a dense SwiGLU MLP of intermediate_size; the MoE block
 *              and the aux loss are the Qwen-style ones of sparse-moe-decoder.ts (no shared expert)
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
import type { Backend } from "@zeromoe/kernels";
import type { Qwen3MoeConfig } from "../config/types.ts";
import type { Parameter, ParamSpec } from "../nn/unit.ts";
import { causalAttention, linear, reshape, rmsnorm, rope } from "../tensor/index.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { attentionScale, type ModelOptions } from "./llama.ts";
import { SparseMoEDecoder } from "./sparse-moe-decoder.ts";
import { ropeFreqOf } from "./rope-scaling.ts";

/** `Qwen3MoeForCausalLM` (module comment). */
export class Qwen3MoeForCausalLM extends SparseMoEDecoder<Qwen3MoeConfig> {
  private readonly qkNorm: { q: Parameter; k: Parameter }[] = [];

  constructor(be: Backend, config: Qwen3MoeConfig, opts: ModelOptions = {}) {
    super(be, config, opts);
    for (let l = 0; l < config.num_hidden_layers; l++) {
      const pre = `model.layers.${l}`;
      this.qkNorm.push({ q: this.units.param(`${pre}.self_attn.q_norm.weight`), k: this.units.param(`${pre}.self_attn.k_norm.weight`) });
    }
  }

  protected familyLayerSpecs(layer: number): ParamSpec[] {
    const c = this.config;
    const pre = `model.layers.${layer}`;
    return [
      { name: `${pre}.self_attn.q_norm.weight`, shape: [c.head_dim], init: { kind: "ones" } },
      { name: `${pre}.self_attn.k_norm.weight`, shape: [c.head_dim], init: { kind: "ones" } },
    ];
  }

  /** Self-attention with per-head q_norm/k_norm before RoPE (module comment); x [B·S, hidden]. */
  protected attention(i: number, x: Tensor, B: number, S: number): Tensor {
    const c = this.config;
    const p = this.layerParams[i]!.attn!;
    const n = this.qkNorm[i]!;
    const H = c.num_attention_heads;
    const Hkv = c.num_key_value_heads;
    const D = c.head_dim;
    const eps = c.rms_norm_eps;
    const q = rope(reshape(rmsnorm(reshape(linear(x, p.q.tensor), [B * S * H, D]), n.q.tensor, eps), [B, S, H, D]), ropeFreqOf(c, S));
    const k = rope(reshape(rmsnorm(reshape(linear(x, p.k.tensor), [B * S * Hkv, D]), n.k.tensor, eps), [B, S, Hkv, D]), ropeFreqOf(c, S));
    const v = reshape(linear(x, p.v.tensor), [B, S, Hkv, D]);
    const o = causalAttention(q, k, v, attentionScale(c));
    return linear(reshape(o, [B * S, H * D]), p.o.tensor);
  }
}
