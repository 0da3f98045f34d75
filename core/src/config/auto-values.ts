/**
 * `"auto"` values of a DeepSpeed config written for the Hugging Face Trainer, filled from the job
 * the way the Trainer's DeepSpeed integration fills them from its TrainingArguments and model
 * (transformers `integrations/deepspeed.py`, `HfTrainerDeepSpeedConfig.trainer_config_process` and
 * `trainer_config_finalize`; docs "DeepSpeed" → "auto values"). The job plays TrainingArguments' part:
 *
 * | key                                          | filled with                                                       |
 * |----------------------------------------------|-------------------------------------------------------------------|
 * | train_micro_batch_size_per_gpu               | the job's value (per_device_train_batch_size); required when auto |
 * | gradient_accumulation_steps                  | the job's value, else 1 (the batch rule)                          |
 * | train_batch_size                             | micro × accumulation × world_size (calculated)                    |
 * | gradient_clipping                            | the job's value, else 1.0 (the Trainer's max_grad_norm default)   |
 * | optimizer.params.lr / betas / eps / weight_decay | the job's value, else the job default                         |
 * | scheduler.params.warmup_min_lr               | 0                                                                 |
 * | scheduler.params.warmup_max_lr               | the optimizer's lr                                                |
 * | scheduler.params.warmup_num_steps            | the job's scheduler value (warmup_steps), else 0                  |
 * | scheduler.params.total_num_steps             | the job's `steps` (num_training_steps)                            |
 * | fp16.enabled, bf16.enabled                   | the job's value, else false                                       |
 * | zero_optimization.reduce_bucket_size         | hidden_size²                                                      |
 * | zero_optimization.stage3_prefetch_bucket_size| int(0.9 · hidden_size²) at stage 3, else the default              |
 * | zero_optimization.stage3_param_persistence_threshold | 10 · hidden_size at stage 3, else the default             |
 *
 * "The job's value" is the value at the same key in the job file (`--config`) when it is not
 * "auto" itself; "the job default" is ZeroMoE's default for the key (docs/config.md), which may
 * differ from TrainingArguments' (lr 5e-5, max_grad_norm 1.0): a job that wants the Trainer's
 * numbers states them. Any other "auto" inside one of DeepSpeed's pydantic config sections
 * ({@link PYDANTIC_SECTIONS}: zero_optimization, fp16, bf16, the monitors, ...) means the key's
 * default, as DeepSpeed's config models drop "auto" values before validating (runtime/config_utils.py
 * DeepSpeedConfigModel, non-strict); elsewhere it is refused naming the key, as DeepSpeed itself
 * would fail on it (the Trainer leaves it unfilled). The warning line lists every filled key with
 * the value it resolved to.
 */
import { addIssue, isPlainObject, type CheckContext } from "./schema.ts";
import { DEEPSPEED_ALIASES, DEEPSPEED_FIELDS } from "./spec-deepspeed.ts";

/** Keys whose "auto" the Trainer fills (dotted paths). */
export const AUTO_KEYS: readonly string[] = [
  "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size", "gradient_clipping",
  "optimizer.params.lr", "optimizer.params.betas", "optimizer.params.eps", "optimizer.params.weight_decay",
  "scheduler.params.warmup_min_lr", "scheduler.params.warmup_max_lr", "scheduler.params.warmup_num_steps", "scheduler.params.total_num_steps",
  "fp16.enabled", "bf16.enabled",
  "zero_optimization.reduce_bucket_size", "zero_optimization.stage3_prefetch_bucket_size", "zero_optimization.stage3_param_persistence_threshold",
];

/** Top-level sections DeepSpeed validates with its pydantic config models, which drop "auto"
 * values (the key then takes its default). */
export const PYDANTIC_SECTIONS: ReadonlySet<string> = new Set(["zero_optimization", "fp16", "bf16", "bfloat16", "tensorboard", "csv_monitor", "wandb", "comet", "comms_logger", "hybrid_engine", "compile", "timers", "tensor_parallel"]);

const HIDDEN_KEYS = new Set(["zero_optimization.reduce_bucket_size", "zero_optimization.stage3_prefetch_bucket_size", "zero_optimization.stage3_param_persistence_threshold"]);

/** What {@link fillAutoBeforeCheck} decided; {@link fillAutoAfterCheck} completes it. */
export interface AutoFill {
  /** Filled keys with why, in the order met; the value is read from the resolved job. */
  filled: { path: string; why: string }[];
  /** Hidden-size based keys to fill once the model is resolved. */
  hidden: string[];
}

function getPath(o: unknown, path: string): unknown {
  let cur = o;
  for (const k of path.split(".")) {
    if (!isPlainObject(cur)) return undefined;
    cur = cur[k];
  }
  return cur;
}

function setPath(o: Record<string, unknown>, path: string, v: unknown): void {
  const ks = path.split(".");
  let cur = o;
  for (const k of ks.slice(0, -1)) cur = cur[k] as Record<string, unknown>;
  if (v === undefined) delete cur[ks[ks.length - 1]!];
  else cur[ks[ks.length - 1]!] = v;
}

/** Every dotted path under `o` whose value is the string "auto". */
function autoPaths(o: unknown, prefix = ""): string[] {
  if (!isPlainObject(o)) return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(o)) {
    const p = prefix ? `${prefix}.${k}` : k;
    if (v === "auto") out.push(p);
    else out.push(...autoPaths(v, p));
  }
  return out;
}

/**
 * Replace the "auto" values of `merged` (the job merged with the DeepSpeed config and the command
 * line; modified in place, copy-on-write of the nested objects it touches) by the job's values
 * (see the module comment). Keys left to a default are deleted so the schema fills them; the
 * hidden-size based keys are deleted here and set by {@link fillAutoAfterCheck}.
 * @param job the job file as parsed (the source of "the job's value")
 * @returns what was filled; records an issue for each "auto" that cannot be filled
 */
export function fillAutoBeforeCheck(merged: Record<string, unknown>, job: Record<string, unknown>, ctx: CheckContext): AutoFill {
  const res: AutoFill = { filled: [], hidden: [] };
  // only the DeepSpeed keys ZeroMoE acts on: ZeroMoE's own keys have real "auto" values (backend:
  // "auto"), and an ignored or unsupported section is not read here (DeepSpeed's pipeline section
  // defaults stages to "auto" itself)
  const paths = autoPaths(merged).filter((p) => {
    const top = p.split(".")[0]!;
    return Object.hasOwn(DEEPSPEED_FIELDS, top) || Object.hasOwn(DEEPSPEED_ALIASES, top);
  });
  if (paths.length === 0) return res;
  // copy the objects on the way to each auto key (the inputs are not modified)
  for (const p of paths) {
    const ks = p.split(".");
    let cur = merged;
    for (const k of ks.slice(0, -1)) {
      cur[k] = { ...(cur[k] as Record<string, unknown>) };
      cur = cur[k] as Record<string, unknown>;
    }
  }
  const jobValue = (p: string): unknown => {
    const v = getPath(job, p);
    return v === "auto" ? undefined : v;
  };
  const take = (p: string, v: unknown, why: string): void => {
    setPath(merged, p, v);
    res.filled.push({ path: p, why });
  };
  for (const p of paths) {
    if (!AUTO_KEYS.includes(p)) {
      if (PYDANTIC_SECTIONS.has(p.split(".")[0]!)) {
        take(p, undefined, 'the default: DeepSpeed\'s config models drop "auto"');
        continue;
      }
      addIssue(ctx, p, `"auto" is not filled for this key: the Hugging Face Trainer fills only ${AUTO_KEYS.join(", ")}, and DeepSpeed drops "auto" only inside ${[...PYDANTIC_SECTIONS].join(", ")}; give a value`);
      continue;
    }
    const jv = jobValue(p);
    if (HIDDEN_KEYS.has(p)) {
      setPath(merged, p, undefined);
      res.hidden.push(p);
      continue;
    }
    switch (p) {
      case "train_micro_batch_size_per_gpu":
        if (jv !== undefined) take(p, jv, "the job's train_micro_batch_size_per_gpu");
        else if (jobValue("train_batch_size") !== undefined) take(p, undefined, "from the job's train_batch_size by the batch rule");
        else addIssue(ctx, p, `"auto" takes the job's train_micro_batch_size_per_gpu (the Trainer's per_device_train_batch_size), but the job file gives none: set it in the job file or here`);
        break;
      case "train_batch_size":
        take(p, jv === undefined ? undefined : jv, jv === undefined ? "micro-batch × gradient_accumulation_steps × world_size, calculated" : "the job's train_batch_size");
        break;
      case "scheduler.params.warmup_min_lr":
        take(p, 0, "the Trainer's fixed value");
        break;
      case "scheduler.params.warmup_max_lr":
        take(p, undefined, "the optimizer's lr");
        break;
      case "scheduler.params.warmup_num_steps":
        take(p, jv ?? 0, jv === undefined ? "the Trainer's warmup_steps default" : "the job's scheduler.params.warmup_num_steps");
        break;
      case "scheduler.params.total_num_steps":
        take(p, undefined, "the job's steps");
        break;
      case "gradient_clipping":
        take(p, jv ?? 1.0, jv === undefined ? "the Trainer's max_grad_norm default" : "the job's value");
        break;
      default:
        take(p, jv, jv === undefined ? "the job default" : "the job's value");
    }
  }
  return res;
}

/**
 * Set the hidden-size based keys of {@link AutoFill.hidden} on the checked job (`hidden_size²`;
 * at stage 3 `int(0.9 · hidden_size²)` and `10 · hidden_size`, else the default stays).
 * @returns the complete `key = value (why)` list
 */
export function fillAutoAfterCheck(fill: AutoFill, job: { model: { hidden_size: number }; zero_optimization: Record<string, unknown> }): void {
  const h = job.model.hidden_size;
  const z = job.zero_optimization;
  const zero3 = z.stage === 3;
  for (const p of fill.hidden) {
    const k = p.split(".")[1]!;
    let v: number | null = null;
    if (k === "reduce_bucket_size") v = h * h;
    else if (zero3 && k === "stage3_prefetch_bucket_size") v = Math.trunc(0.9 * h * h);
    else if (zero3 && k === "stage3_param_persistence_threshold") v = 10 * h;
    if (v !== null) z[k] = v;
    const why = k === "reduce_bucket_size" ? `hidden_size² = ${h}²` : k === "stage3_prefetch_bucket_size" ? `0.9 · hidden_size² = 0.9 · ${h}²` : `10 · hidden_size = 10 · ${h}`;
    fill.filled.push({ path: p, why: v !== null ? why : "the default: the Trainer fills it at stage 3 only" });
  }
}

/** The `key = value (why)` list of a fill, each value read from the resolved job `out` (after the
 * cross-field rules, so calculated values such as train_batch_size are shown). */
export function describeAutoFill(fill: AutoFill, out: unknown): string[] {
  return fill.filled.map(({ path, why }) => `${path} = ${JSON.stringify(getPath(out, path)) ?? "unset"} (${why})`);
}
