/**
 * Resolution of `expert_parallel` (DeepSpeed AutoEP) against the model: every DeepSpeed key either
 * acts or is refused with an issue naming it (docs/config.md "expert_parallel"). The family facts
 * come from the AutoEP presets (autoep-presets.ts).
 *
 * Acting keys: enabled, autoep_size (the expert-parallel group size: the job's `moe.ep_size`, which
 * the engine's process groups, the memory estimate and checkpoints read), preset_model,
 * moe_layer_pattern (checked against every MoE block by the plugin), load_balance_coeff, route_norm (the replaced
 * layers' renormalisation of the top-k weights), grouped_mm_backend auto/sequential, top_k
 * ("auto" or the model's num_experts_per_tok, like `moe.k`). Keys that must agree with the
 * family (router/expert/shared-expert names, weight names, config attributes, score function,
 * routed_scaling_factor, DeepSeek's expert groups) are accepted when they do and refused
 * otherwise; keys for features no built family has (score_apply "pre", route_scale ≠ 1) are
 * refused when set. load_balance_coeff (null by default here; DeepSpeed's default is 1e-3) turns
 * on the aux-loss-free expert-bias update for any family (docs/models.md).
 */
import { AUTOEP_PRESETS } from "./autoep-presets.ts";
import { moeShape } from "./moe-shape.ts";
import { addIssue, isPlainObject, type CheckContext } from "./schema.ts";
import type { JobConfig, SparseModelConfig } from "./types.ts";
import { QUOTE_MESSAGE_CHARS, quoteUntrusted } from "./quote-untrusted.ts";

/** The model's own renormalisation of the top-k weights (Mixtral always; Qwen: norm_topk_prob). */
function modelRouteNorm(m: SparseModelConfig): boolean {
  return "norm_topk_prob" in m ? Boolean((m as { norm_topk_prob: boolean }).norm_topk_prob) : true;
}

/** The model's routed_scaling_factor (1 for families without one). */
function modelRoutedScale(m: SparseModelConfig): number {
  const v = (m as { routed_scaling_factor?: number }).routed_scaling_factor;
  return typeof v === "number" ? v : 1;
}

/**
 * Check and complete `job.expert_parallel` (enabled) for the sparse model `model`; sets
 * `job.moe.ep_size` to autoep_size. Issues go to `ctx` under `expert_parallel.<key>`.
 * @param raw the job as given (to tell an explicit `moe.ep_size` from the default)
 */
export function resolveExpertParallel(job: JobConfig, model: SparseModelConfig, raw: Record<string, unknown>, ctx: CheckContext): void {
  const ep = job.expert_parallel;
  const at = (k: string) => `expert_parallel.${k}`;
  if (ep.preset_model === null) ep.preset_model = model.model_type as NonNullable<typeof ep.preset_model>;
  else if (ep.preset_model !== model.model_type) {
    addIssue(ctx, at("preset_model"), `preset "${ep.preset_model}" does not match the model: model_type is "${model.model_type}" (use preset_model "${model.model_type}" or leave it null)`);
    return;
  }
  const preset = AUTOEP_PRESETS[ep.preset_model];
  const shape = moeShape(model)!;
  const E = shape.numExperts;
  if (E % ep.autoep_size !== 0) addIssue(ctx, at("autoep_size"), `num_local_experts ${E} is not divisible by autoep_size ${ep.autoep_size}`);
  if (job.world_size % ep.autoep_size !== 0) addIssue(ctx, at("autoep_size"), `world_size ${job.world_size} is not divisible by autoep_size ${ep.autoep_size}${job.world_size < ep.autoep_size && E % job.world_size === 0 ? ` (to run at world_size ${job.world_size}, e.g. to resume an autoep_size-${ep.autoep_size} checkpoint, which reshards: --set expert_parallel.autoep_size=${job.world_size})` : ""}`);
  if (job.moe && isPlainObject(raw.moe) && raw.moe.ep_size !== undefined && job.moe.ep_size !== ep.autoep_size) {
    addIssue(ctx, "moe.ep_size", `moe.ep_size ${job.moe.ep_size} differs from expert_parallel.autoep_size ${ep.autoep_size}; give one`);
  }
  if (job.moe) job.moe.ep_size = ep.autoep_size;

  if (ep.moe_layer_pattern !== null) {
    try {
      new RegExp(`^(?:${ep.moe_layer_pattern})$`);
    } catch (e) {
      addIssue(ctx, at("moe_layer_pattern"), `not a valid regular expression: ${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)}`);
    }
  }
  const mustBe = (key: string, got: unknown, allowed: readonly unknown[], why: string) => {
    if (got === null || got === undefined || allowed.includes(got)) return;
    addIssue(ctx, at(key), `${JSON.stringify(got)} is not the ${ep.preset_model} ${why} (expected ${allowed.map((a) => JSON.stringify(a)).join(" or ")}); AutoEP here replaces the family's own blocks only`);
  };
  mustBe("router_pattern", ep.router_pattern, [preset.router], "router child name");
  mustBe("expert_pattern", ep.expert_pattern, [preset.experts], "experts child name");
  mustBe("expert_w1", ep.expert_w1, [preset.w1, preset.fusedW1], "expert gate weight");
  mustBe("expert_w2", ep.expert_w2, [preset.w2, preset.fusedW2], "expert down weight");
  if (ep.expert_w3 !== undefined) {
    const fused = ep.expert_w1 === preset.fusedW1;
    if (ep.expert_w3 === null && !fused) addIssue(ctx, at("expert_w3"), `null means gate and up are fused in expert_w1 "${preset.fusedW1}", but expert_w1 is ${JSON.stringify(ep.expert_w1)}`);
    else mustBe("expert_w3", ep.expert_w3, [preset.w3], "expert up weight");
  }
  mustBe("num_experts_attr", ep.num_experts_attr, preset.numExpertsAttrs, "config key of the number of experts");
  mustBe("top_k_attr", ep.top_k_attr, [preset.topKAttr], "config key of top-k");
  if (ep.has_shared_experts !== null && ep.has_shared_experts !== (preset.sharedExperts !== null)) {
    addIssue(ctx, at("has_shared_experts"), `${ep.has_shared_experts} does not match the model: ${ep.preset_model} ${preset.sharedExperts ? `has shared experts ("${preset.sharedExperts}")` : "has no shared experts"}`);
  }
  if (ep.shared_experts_pattern !== null) {
    if (preset.sharedExperts === null) addIssue(ctx, at("shared_experts_pattern"), `${ep.preset_model} has no shared experts`);
    else mustBe("shared_experts_pattern", ep.shared_experts_pattern, [preset.sharedExperts], "shared-expert child name");
  }
  if (ep.score_func !== "auto" && ep.score_func !== preset.scoreFunc) {
    addIssue(ctx, at("score_func"), `"${ep.score_func}" is not the ${ep.preset_model} router's score function ("${preset.scoreFunc}"); use "auto"`);
  }
  if (ep.grouped_mm_backend === "torch" || ep.grouped_mm_backend === "cutlass") {
    addIssue(ctx, at("grouped_mm_backend"), `"${ep.grouped_mm_backend}" is a CUDA library backend; ZeroMoE supports "auto" or "sequential" (its grouped matmul computes each expert's rows as that expert's matmul)`);
  }
  const given = isPlainObject(raw.expert_parallel) ? raw.expert_parallel : {};
  if (given.use_grouped_mm === false) ctx.warnings.push(`expert_parallel.use_grouped_mm: false — ZeroMoE's experts always run as one grouped matmul per projection (row offsets on the device); each expert's rows get that expert's matmul, so the arithmetic is DeepSpeed's "sequential" backend's (bit for bit on the cpu backend)`);
  if (ep.score_apply === "pre") addIssue(ctx, at("score_apply"), `"pre" (weighting the expert input) is not supported; the families here apply the weight after the expert ("post" or "auto")`);
  if (ep.route_scale !== 1) addIssue(ctx, at("route_scale"), `${ep.route_scale} is not supported (only 1.0: the routed weights are not rescaled)`);
  // group-limited routing is the model's own (DeepSeek n_group / topk_group): a value must agree
  const groups = "n_group" in model ? { n: model.n_group, k: model.topk_group } : null;
  const groupKey = (key: "num_expert_groups" | "num_limited_groups", got: number | null, own: number | null | undefined, hf: string) => {
    if (got === null) return;
    if (!groups) addIssue(ctx, at(key), `${ep.preset_model} has no group-limited routing (leave it null)`);
    else if (got !== own) addIssue(ctx, at(key), `${got} differs from the model's ${hf} ${own}; AutoEP keeps the model's routing (leave it null)`);
  };
  groupKey("num_expert_groups", ep.num_expert_groups, groups?.n, "n_group");
  groupKey("num_limited_groups", ep.num_limited_groups, groups?.k, "topk_group");
  const scale = modelRoutedScale(model);
  if (ep.routed_scaling_factor === "auto") ep.routed_scaling_factor = scale;
  else if (ep.routed_scaling_factor !== scale) addIssue(ctx, at("routed_scaling_factor"), `${ep.routed_scaling_factor} differs from the model's ${scale}; use "auto"`);
  if (ep.top_k === "auto") ep.top_k = shape.topK;
  else if (ep.top_k !== shape.topK) addIssue(ctx, at("top_k"), `${ep.top_k} differs from the model's num_experts_per_tok ${shape.topK}; set model.num_experts_per_tok (or "auto")`);
  if (ep.route_norm === null) ep.route_norm = modelRouteNorm(model);
}
