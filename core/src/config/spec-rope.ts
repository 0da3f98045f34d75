/**
 * The RoPE keys of a Hugging Face config.json: `rope_scaling` (Transformers 4; `type` is its old
 * name for `rope_type`) and `rope_parameters` (Transformers 5: `rope_type`, `rope_theta` and the
 * scaling's own keys), read into the model's `rope_theta` and `rope_scaling`. Implemented: the
 * default RoPE, "linear", "dynamic" and "llama3" (models/rope-scaling.ts, with Transformers'
 * formulas); "yarn", "longrope" and others are refused naming the type (they also scale the
 * attention's cos/sin, which the kernels do not). Keys a scaling does not use warn, as
 * Transformers' rope_config_validation warns ("Unrecognized keys in rope_scaling").
 */
import { addIssue, isPlainObject, joinPath, show, type CheckContext } from "./schema.ts";
import type { RopeScalingConfig } from "./types.ts";

/** Keys each implemented rope_type needs (Transformers' _validate_*_parameters required keys). */
const REQUIRED: Readonly<Record<string, readonly string[]>> = {
  default: [],
  linear: ["factor"],
  dynamic: ["factor"],
  llama3: ["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"],
};

/** Keys a rope_type may carry without effect on it (Transformers' optional keys). */
const OPTIONAL: Readonly<Record<string, readonly string[]>> = { default: [], linear: [], dynamic: ["original_max_position_embeddings"], llama3: [] };

const NOT_IMPLEMENTED: Readonly<Record<string, string>> = {
  yarn: "YaRN also scales the attention (cos/sin by its attention_factor, DeepSeek's softmax by mscale²), which is not implemented",
  longrope: "LongRoPE (Phi-3) is not implemented: no supported family uses it",
  ntk: "static NTK scaling is not implemented",
};

/**
 * Reads one rope section (`rope_scaling` or `rope_parameters`, `value`, at `path`) into its scaling
 * (null for the default RoPE) and, for rope_parameters, its rope_theta.
 * @returns undefined after recording an issue
 */
export function readRopeSection(value: unknown, path: string, ctx: CheckContext, form: "rope_scaling" | "rope_parameters"): { scaling: RopeScalingConfig | null; theta?: number } | undefined {
  if (value === null || value === undefined) return { scaling: null };
  if (!isPlainObject(value)) {
    addIssue(ctx, path, `expected an object {rope_type, ...} or null, got ${show(value)}`);
    return undefined;
  }
  const typeKey = value.rope_type !== undefined ? "rope_type" : value.type !== undefined ? "type" : null;
  const type = typeKey === null ? "default" : value[typeKey];
  if (typeof type !== "string") {
    addIssue(ctx, joinPath(path, typeKey ?? "rope_type"), `expected a string, got ${show(type)}`);
    return undefined;
  }
  if (!Object.hasOwn(REQUIRED, type)) {
    const why = NOT_IMPLEMENTED[type] ?? `rope_type ${show(type)} is not one Transformers defines`;
    addIssue(ctx, joinPath(path, typeKey ?? "rope_type"), `${show(type)} is not supported: ${why}; implemented: "default", "linear", "dynamic", "llama3"`);
    return undefined;
  }
  const out: Record<string, number> = {};
  let ok = true;
  for (const k of REQUIRED[type]!) {
    const v = value[k];
    const int = k === "original_max_position_embeddings";
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0 || (int && !Number.isInteger(v))) {
      addIssue(ctx, joinPath(path, k), v === undefined ? `required for rope_type "${type}"` : `expected a ${int ? "positive integer" : "positive number"}, got ${show(v)}`);
      ok = false;
    } else out[k] = v;
  }
  if (type === "llama3" && ok && out.high_freq_factor! <= out.low_freq_factor!) {
    addIssue(ctx, joinPath(path, "high_freq_factor"), `must be greater than low_freq_factor (${out.low_freq_factor}), got ${out.high_freq_factor}`);
    ok = false;
  }
  let theta: number | undefined;
  if (form === "rope_parameters" && value.rope_theta !== undefined) {
    if (typeof value.rope_theta !== "number" || !(value.rope_theta > 0)) {
      addIssue(ctx, joinPath(path, "rope_theta"), `expected a positive number, got ${show(value.rope_theta)}`);
      ok = false;
    } else theta = value.rope_theta;
  }
  const known = new Set([typeKey ?? "rope_type", "rope_type", "type", ...REQUIRED[type]!, ...OPTIONAL[type]!, ...(form === "rope_parameters" ? ["rope_theta", "partial_rotary_factor"] : [])]);
  for (const k of Object.keys(value)) {
    if (!known.has(k)) ctx.warnings.push(`${joinPath(path, k)}: ignored (not used by rope_type "${type}"; Transformers warns about it too)`);
  }
  if (form === "rope_parameters" && value.partial_rotary_factor !== undefined && value.partial_rotary_factor !== 1) {
    addIssue(ctx, joinPath(path, "partial_rotary_factor"), `partial rotary embeddings are not implemented (only 1.0), got ${show(value.partial_rotary_factor)}`);
    ok = false;
  }
  if (!ok) return undefined;
  const scaling: RopeScalingConfig | null =
    type === "default" ? null : type === "llama3" ? { rope_type: "llama3", factor: out.factor!, low_freq_factor: out.low_freq_factor!, high_freq_factor: out.high_freq_factor!, original_max_position_embeddings: out.original_max_position_embeddings! } : { rope_type: type as "linear" | "dynamic", factor: out.factor! };
  return theta === undefined ? { scaling } : { scaling, theta };
}
