/**
 * The RoPE keys of a Hugging Face config.json: `rope_scaling` (Transformers 4; `type` is its old
 * name for `rope_type`) and `rope_parameters` (Transformers 5: `rope_type`, `rope_theta` and the
 * scaling's own keys), read into the model's `rope_theta` and `rope_scaling`. Implemented: the
 * default RoPE, "linear", "dynamic", "llama3", "yarn" and "longrope" (models/rope-scaling.ts, with
 * Transformers' formulas and key defaults: `_compute_*_parameters` of modeling_rope_utils.py); others
 * are refused naming the type. Keys a scaling does not use warn, as Transformers'
 * rope_config_validation warns ("Unrecognized keys in rope_scaling"). Optional keys given as null
 * are left out (Transformers reads them with `.get`, null meaning its default). The lengths of
 * LongRoPE's factor lists (head_dim / 2) are checked with the model (spec-model.ts).
 */
import { addIssue, isPlainObject, joinPath, show, type CheckContext } from "./schema.ts";
import type { RopeScalingConfig } from "./types.ts";

/** Keys each implemented rope_type needs (Transformers' _validate_*_parameters required keys). */
const REQUIRED: Readonly<Record<string, readonly string[]>> = {
  default: [],
  linear: ["factor"],
  dynamic: ["factor"],
  llama3: ["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"],
  yarn: ["factor"],
  longrope: ["short_factor", "long_factor"],
};

/** Optional keys of each rope_type: those it reads (yarn, longrope) or carries without effect (dynamic). */
const OPTIONAL: Readonly<Record<string, readonly string[]>> = {
  default: [],
  linear: [],
  dynamic: ["original_max_position_embeddings"],
  llama3: [],
  yarn: ["original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"],
  longrope: ["factor", "attention_factor", "original_max_position_embeddings"],
};

/** Largest finite f32: a factor past it cannot reach the f32 frequency tables. */
const F32_MAX = 3.4028234663852886e38;
/** Most per-frequency factors a LongRoPE list may hold (head_dim / 2 ≤ 2^31 − 1 / 2; the lists are
 * checked against head_dim with the model). */
const MAX_FACTORS = 1 << 20;

const NOT_IMPLEMENTED: Readonly<Record<string, string>> = {
  ntk: "static NTK scaling is not implemented",
};

/** Keys read as non-negative reals (0 meaning Transformers' default where it reads them with `or`). */
const NON_NEGATIVE = new Set(["beta_fast", "beta_slow", "mscale", "mscale_all_dim"]);
/** Keys read as integers. */
const INTEGER = new Set(["original_max_position_embeddings"]);

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
    addIssue(ctx, joinPath(path, typeKey ?? "rope_type"), `${show(type)} is not supported: ${why}; implemented: "default", "linear", "dynamic", "llama3", "yarn", "longrope"`);
    return undefined;
  }
  const out: Record<string, number | number[] | boolean> = {};
  let ok = true;
  const readKey = (k: string, required: boolean): void => {
    const v = value[k];
    if (!required && (v === undefined || v === null)) return;
    if (v === undefined) {
      addIssue(ctx, joinPath(path, k), `required for rope_type "${type}"`);
      ok = false;
      return;
    }
    if (k === "truncate") {
      if (typeof v !== "boolean") {
        addIssue(ctx, joinPath(path, k), `expected a boolean, got ${show(v)}`);
        ok = false;
      } else out[k] = v;
      return;
    }
    if (k === "short_factor" || k === "long_factor") {
      const good = Array.isArray(v) && v.length > 0 && v.length <= MAX_FACTORS && v.every((x) => typeof x === "number" && Number.isFinite(x) && x > 0 && x <= F32_MAX);
      if (!good) {
        addIssue(ctx, joinPath(path, k), `expected a non-empty list of positive numbers (one per frequency: head_dim / 2), got ${show(v)}`);
        ok = false;
      } else out[k] = (v as number[]).slice();
      return;
    }
    const int = INTEGER.has(k);
    const nonNeg = NON_NEGATIVE.has(k);
    const max = int ? 2 ** 24 : F32_MAX;
    if (typeof v !== "number" || !Number.isFinite(v) || (nonNeg ? v < 0 : v <= 0) || v > max || (int && !Number.isInteger(v))) {
      addIssue(ctx, joinPath(path, k), `expected a ${int ? "positive integer" : nonNeg ? "non-negative number" : "positive number"} ≤ ${int ? "2^24" : "3.4e38 (f32)"}, got ${show(v)}`);
      ok = false;
    } else out[k] = v;
  };
  for (const k of REQUIRED[type]!) readKey(k, true);
  if (type === "yarn" || type === "longrope") for (const k of OPTIONAL[type]!) readKey(k, false);
  if (type === "longrope" && ok && (out.short_factor as number[]).length !== (out.long_factor as number[]).length) {
    addIssue(ctx, joinPath(path, "long_factor"), `must have as many factors as short_factor (${(out.short_factor as number[]).length}), got ${(out.long_factor as number[]).length}`);
    ok = false;
  }
  if (type === "llama3" && ok && (out.high_freq_factor as number) <= (out.low_freq_factor as number)) {
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
  const n = out as Record<string, number>;
  const scaling: RopeScalingConfig | null =
    type === "default" ? null
    : type === "llama3" ? { rope_type: "llama3", factor: n.factor!, low_freq_factor: n.low_freq_factor!, high_freq_factor: n.high_freq_factor!, original_max_position_embeddings: n.original_max_position_embeddings! }
    : type === "yarn" || type === "longrope" ? ({ rope_type: type, ...out } as RopeScalingConfig)
    : { rope_type: type as "linear" | "dynamic", factor: n.factor! };
  return theta === undefined ? { scaling } : { scaling, theta };
}
