/**
 * The `expert_parallel` section (DeepSpeed AutoEP), with DeepSpeed's documented keys and defaults
 * except `load_balance_coeff` (DeepSpeed: 1e-3; here null = off, see docs/config.md). Value rules that
 * depend on the model (preset match, keys that must agree with the family) are in
 * resolve-expert-parallel.ts; each key either acts or is refused there, naming it.
 */
import { addIssue, show, type CheckContext, type ObjectSpec, type Spec } from "./schema.ts";

const optString = (doc: string): Spec => ({ kind: "string", nullable: true, default: null, doc });
const optBool = (doc: string): Spec => ({ kind: "boolean", nullable: true, default: null, doc });
const optPosInt = (doc: string): Spec => ({ kind: "number", int: true, min: 1, nullable: true, default: null, doc });

/** `"auto"` or a number accepted by `ok` (DeepSpeed's `top_k` / `routed_scaling_factor`). */
function autoOr(what: string, ok: (v: number) => boolean): Spec {
  return {
    kind: "custom",
    typeName: `"auto" or ${what}`,
    default: "auto",
    doc: `"auto" (the model's) or ${what}`,
    check(value: unknown, path: string, ctx: CheckContext): unknown {
      if (value === "auto") return value;
      if (typeof value === "number" && Number.isFinite(value) && ok(value)) return value;
      addIssue(ctx, path, `expected "auto" or ${what}, got ${show(value)}`);
      return undefined;
    },
  };
}

/** `expert_parallel` (AutoEP). */
export const EXPERT_PARALLEL_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "AutoEP: replace a Hugging Face model's MoE blocks with expert-parallel ones (docs/models.md)",
  fields: {
    enabled: { kind: "boolean", default: false, doc: "turn AutoEP on" },
    autoep_size: { kind: "number", int: true, min: 1, default: 1, doc: "expert-parallel group size (divides world_size and the number of experts)" },
    preset_model: { kind: "enum", values: ["mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v2", "deepseek_v3"], nullable: true, default: null, doc: "model family whose MoE blocks to find; must be the model's model_type (null: from model_type)" },
    moe_layer_pattern: optString("regex (full match) the MoE block names must match (null: the preset's); it must match every MoE block"),
    router_pattern: optString("router child name (null: the preset's; only the preset's name is accepted)"),
    expert_pattern: optString("experts child name (null: the preset's; only the preset's name is accepted)"),
    use_grouped_mm: { kind: "boolean", default: true, doc: "grouped GEMM for the experts; ZeroMoE always runs one grouped matmul per projection over the local experts (per expert the arithmetic of DeepSpeed's sequential backend): false is a warning" },
    grouped_mm_backend: { kind: "enum", values: ["auto", "torch", "cutlass", "sequential"], default: "auto", doc: "expert GEMM backend: auto or sequential (torch/cutlass are CUDA libraries, refused)" },
    route_norm: optBool("renormalise the top-k weights to sum 1 (null: the model's norm_topk_prob; Mixtral: true)"),
    route_scale: { kind: "number", exclusiveMin: true, min: 0, default: 1.0, doc: "factor on the routed weights (only 1.0 is accepted)" },
    score_apply: { kind: "enum", values: ["auto", "pre", "post"], default: "auto", doc: "apply the routing weight after the expert (post; auto = post) — pre is refused" },
    num_expert_groups: optPosInt("expert groups for group-limited routing: must be the model's n_group (DeepSeek; refused for other families)"),
    num_limited_groups: optPosInt("groups a token may use: must be the model's topk_group"),
    score_func: { kind: "enum", values: ["auto", "softmax", "sigmoid"], default: "auto", doc: "router score function; must be the family's (auto)" },
    top_k: autoOr("an integer ≥ 1 (experts per token, at most the number of experts)", (v) => Number.isInteger(v) && v >= 1),
    load_balance_coeff: { kind: "number", min: 0, nullable: true, default: null, doc: "aux-loss-free load balancing: the expert-bias update rate γ, any family (null: off; DeepSpeed's default is 1e-3)" },
    routed_scaling_factor: autoOr("a number > 0 (must be the model's: 1 for families without it)", (v) => v > 0),
    expert_w1: optString("expert gate weight name (the preset's Hub name or Transformers 5's gate_up_proj)"),
    expert_w2: optString("expert down weight name (the preset's or down_proj)"),
    expert_w3: { kind: "string", nullable: true, doc: "expert up weight name (the preset's), or null for fused gate_up_proj; absent: the preset's" },
    num_experts_attr: optString("config key holding the number of experts (one of the family's)"),
    top_k_attr: optString("config key holding top-k (num_experts_per_tok)"),
    has_shared_experts: optBool("whether the blocks have shared experts (must be the family's)"),
    shared_experts_pattern: optString("shared-expert child name (must be the family's)"),
  },
};
