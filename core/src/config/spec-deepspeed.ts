/**
 * Schema of the DeepSpeed keys a job file (or a `--deepspeed ds_config.json`) may hold, with
 * DeepSpeed's names and defaults. Sources: deepspeed.ai "DeepSpeed Configuration JSON" and
 * DeepSpeed's `runtime/constants.py`, `runtime/zero/config.py`, `runtime/zero/offload_config.py`
 * (summarised, with what each key means, in docs/domain.md §3).
 * Cross-field rules (batch-size rule, fp16 × bf16, offload × stage, scheduler defaults taken from
 * the optimizer and `steps`) live in `resolve.ts`.
 */
import { addIssue, check, isPlainObject, joinPath, show, typeOfJson, type CheckContext, type ObjectSpec, type Spec } from "./schema.ts";
import { suggest } from "./errors.ts";
import { EXPERT_PARALLEL_SPEC } from "./spec-expert-parallel.ts";
import { COMMS_LOGGER_SPEC, CSV_MONITOR_SPEC, noEffect, noEffectUnless, TENSORBOARD_SPEC } from "./spec-observe.ts";
import { DEEPSPEED_IGNORED, DEEPSPEED_UNSUPPORTED, falseOnly, OFFLOAD_OPTIMIZER_IGNORED, ZERO_IGNORED, ZERO_UNSUPPORTED } from "./spec-deepspeed-other.ts";

const posInt = (doc: string, def?: number): Spec => ({ kind: "number", int: true, min: 1, default: def, doc });
const nonNegInt = (doc: string, def?: number): Spec => ({ kind: "number", int: true, min: 0, default: def, doc });
const bool = (doc: string, def: boolean): Spec => ({ kind: "boolean", default: def, doc });

/**
 * A deprecated DeepSpeed key that only `false` may take (it then asks for nothing and resolves to
 * undefined); any other value is an issue at the key naming `use`, the current way to ask for it.
 */
function deprecatedFalse(replacement: string, use: string): Spec {
  return {
    kind: "custom",
    typeName: "false (deprecated)",
    doc: `deprecated DeepSpeed key: use ${replacement}`,
    check(value: unknown, path: string, ctx: CheckContext): unknown {
      if (value !== false) addIssue(ctx, path, `deprecated DeepSpeed key (got ${show(value)}): use ${use}`);
      return undefined;
    },
  };
}

/** `optimizer.params` for Adam/AdamW (DeepSpeed FusedAdam defaults). */
export const OPTIMIZER_PARAMS_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "optimizer hyper-parameters",
  fields: {
    lr: { kind: "number", min: 0, default: 1e-3, doc: "learning rate (the peak lr when a scheduler derives from it)" },
    betas: {
      kind: "array",
      items: { kind: "number", min: 0, max: 1, exclusiveMax: true },
      minLength: 2,
      maxLength: 2,
      default: [0.9, 0.999],
      doc: "Adam β1, β2 (each in [0, 1))",
    },
    eps: { kind: "number", min: 0, exclusiveMin: true, default: 1e-8, doc: "Adam ε added to √v̂" },
    weight_decay: { kind: "number", min: 0, default: 0, doc: "weight decay (decoupled when adam_w_mode)" },
    adam_w_mode: bool("decoupled weight decay (AdamW, Loshchilov & Hutter 2019); false = L2 added to the gradient", true),
    bias_correction: { kind: "boolean", doc: "Lamb only (default true): step size lr·√(1−β2^t)/(1−β1^t); false = lr" },
    max_grad_norm: { kind: "number", min: 0, doc: "Lamb only (default 0 = off): gradients divided by (‖g‖ + 1e-6)/max_grad_norm when that exceeds 1" },
    max_coeff: { kind: "number", min: 0, exclusiveMin: true, doc: "Lamb only (default 10): upper clamp of the trust ratio ‖p‖/‖update‖" },
    min_coeff: { kind: "number", min: 0, doc: "Lamb only (default 0.01): lower clamp of the trust ratio" },
    eps_inside_sqrt: { kind: "boolean", doc: "Lamb only (default false): denominator √(v + eps) instead of √v + eps" },
  },
  ignored: { torch_adam: "ZeroMoE has one fused Adam kernel" },
};

/** DeepSpeed optimizers ZeroMoE refuses, with the reason (lower-case name → why). */
export const REFUSED_OPTIMIZERS: Readonly<Record<string, string>> = {
  onebitadam: "1-bit Adam compresses the gradient all-reduce to 1 bit with error feedback after a warmup of plain Adam steps (Tang et al. 2021); ZeroMoE's reduce paths send exact fp32/16-bit sums in a fixed rank order (bit-identical across ZeRO stages) and have no compressed collective, and DeepSpeed itself supports it only without ZeRO stage 2/3",
  zerooneadam: "0/1 Adam adds 1-bit compressed communication and variance freezing/local steps (Lu et al. 2022); ZeroMoE has no compressed collectives and its reduce paths are exact, and DeepSpeed supports it only without ZeRO stage 2/3",
  onebitlamb: "1-bit LAMB needs compressed (1-bit, error-feedback) communication, which ZeroMoE's exact reduce paths do not have, plus LAMB's per-tensor trust ratios, and DeepSpeed supports it only without ZeRO stage 2/3",
};

/** `optimizer` section. */
export const OPTIMIZER_SPEC: ObjectSpec = {
  kind: "object",
  default: { type: "AdamW" },
  doc: "optimizer (DeepSpeed `optimizer` section)",
  fields: {
    type: {
      kind: "custom",
      typeName: '"Adam" | "AdamW" | "Lamb" (case-insensitive)',
      default: "AdamW",
      doc: "optimizer name: Adam, AdamW or Lamb (DeepSpeed FusedLamb); the compressed-communication optimizers are refused, saying why",
      check(value: unknown, path: string, ctx: CheckContext): unknown {
        const refused = typeof value === "string" ? REFUSED_OPTIMIZERS[value.toLowerCase()] : undefined;
        if (refused) {
          addIssue(ctx, path, `optimizer "${value}" is not available: ${refused}; use "AdamW", "Adam" or "Lamb"`);
          return undefined;
        }
        return check(value, { kind: "enum", values: ["Adam", "AdamW", "Lamb"], caseInsensitive: true }, path, ctx);
      },
    },
    params: OPTIMIZER_PARAMS_SPEC,
  },
};

const WARMUP_TYPE: Spec = { kind: "enum", values: ["log", "linear"], default: "log", doc: "warmup curve: log or linear" };

/** Param specs per scheduler type. `warmup_max_lr` and `total_num_steps` defaults are filled by
 * resolve.ts (optimizer lr; job `steps`). Sources: deepspeed/runtime/lr_schedules.py. */
export const SCHEDULER_PARAM_SPECS: Readonly<Record<"WarmupLR" | "WarmupDecayLR" | "WarmupCosineLR" | "OneCycle" | "LRRangeTest", ObjectSpec>> = {
  WarmupLR: {
    kind: "object",
    fields: {
      warmup_min_lr: { kind: "number", min: 0, default: 0, doc: "lr at step 0" },
      warmup_max_lr: { kind: "number", min: 0, doc: "lr after warmup (default: optimizer.params.lr)" },
      warmup_num_steps: { kind: "number", int: true, min: 0, default: 1000, doc: "warmup length (DeepSpeed uses max(2, value))" },
      warmup_type: WARMUP_TYPE,
    },
  },
  WarmupDecayLR: {
    kind: "object",
    fields: {
      total_num_steps: posInt("step at which lr reaches 0 (default: job `steps`)"),
      warmup_min_lr: { kind: "number", min: 0, default: 0, doc: "lr at step 0" },
      warmup_max_lr: { kind: "number", min: 0, doc: "lr after warmup (default: optimizer.params.lr)" },
      warmup_num_steps: { kind: "number", int: true, min: 0, default: 1000, doc: "warmup length (DeepSpeed uses max(2, value))" },
      warmup_type: WARMUP_TYPE,
    },
  },
  WarmupCosineLR: {
    kind: "object",
    fields: {
      total_num_steps: posInt("length of warmup + cosine decay (default: job `steps`)"),
      warmup_min_ratio: { kind: "number", min: 0, max: 1, default: 0, doc: "lr ratio (of optimizer lr) at step 0" },
      warmup_num_steps: { kind: "number", int: true, min: 0, default: 1000, doc: "warmup length (DeepSpeed uses max(2, value))" },
      cos_min_ratio: { kind: "number", min: 0, max: 1, default: 1e-4, doc: "lr ratio at the end of the cosine" },
      warmup_type: WARMUP_TYPE,
    },
  },
  // 1cycle (Smith 2018); DeepSpeed OneCycle's arguments and defaults (optim/cyclic-schedulers.ts)
  OneCycle: {
    kind: "object",
    fields: {
      cycle_min_lr: { kind: "number", min: 0, required: true, doc: "lr at the start and end of the cycle" },
      cycle_max_lr: { kind: "number", min: 0, required: true, doc: "lr at the top of the cycle" },
      decay_lr_rate: { kind: "number", min: 0, default: 0, doc: "after the cycle: lr = cycle_min_lr / (1 + rate · steps / decay_step_size)" },
      cycle_first_step_size: posInt("steps of the rising half", 2000),
      cycle_second_step_size: { kind: "number", int: true, min: 1, nullable: true, default: null, doc: "steps of the falling half (null: cycle_first_step_size)" },
      cycle_first_stair_count: nonNegInt("stairs of the rising half (0: continuous)", 0),
      cycle_second_stair_count: { kind: "number", int: true, min: 0, nullable: true, default: null, doc: "stairs of the falling half (null: cycle_first_stair_count)" },
      decay_step_size: nonNegInt("steps per decay interval after the cycle (0: no decay)", 0),
      cycle_momentum: bool("cycle Adam's beta1 inversely to the lr (betas become (beta1, 0.99), as DeepSpeed sets them)", true),
      cycle_min_mom: { kind: "number", min: 0, max: 1, exclusiveMax: true, default: 0.8, doc: "beta1 at the top of the cycle" },
      cycle_max_mom: { kind: "number", min: 0, max: 1, exclusiveMax: true, default: 0.9, doc: "beta1 at the start and end of the cycle" },
      decay_mom_rate: { kind: "number", min: 0, default: 0, doc: "after the cycle: beta1 = cycle_max_mom · (1 + rate · steps / decay_step_size)" },
    },
  },
  // the lr range test (Smith 2017); DeepSpeed LRRangeTest's arguments and defaults
  LRRangeTest: {
    kind: "object",
    fields: {
      lr_range_test_min_lr: { kind: "number", min: 0, default: 1e-3, doc: "lr at step 0" },
      lr_range_test_step_size: posInt("steps per interval", 2000),
      lr_range_test_step_rate: { kind: "number", min: 0, default: 1, doc: "lr = min_lr · (1 + step_rate · interval)" },
      lr_range_test_staircase: bool("whole intervals only (floor) instead of continuous", false),
    },
  },
};

/** `scheduler` section: `type` selects which params are allowed. */
export const SCHEDULER_SPEC: Spec = {
  kind: "custom",
  typeName: "object {type, params} or null",
  nullable: true,
  default: null,
  doc: "learning-rate schedule (DeepSpeed `scheduler` section); null = constant lr",
  variants: SCHEDULER_PARAM_SPECS,
  variantKey: "params",
  check(value: unknown, path: string, ctx: CheckContext): unknown {
    if (!isPlainObject(value)) {
      addIssue(ctx, path, `expected an object {type, params} or null, got ${typeOfJson(value)} ${show(value)}`);
      return undefined;
    }
    for (const k of Object.keys(value)) {
      if (k !== "type" && k !== "params") {
        const near = suggest(k, ["type", "params"]);
        addIssue(ctx, joinPath(path, k), `unknown key${near ? `; did you mean "${near}"?` : "; allowed keys: type, params"}`);
      }
    }
    const typeSpec: Spec = { kind: "enum", values: Object.keys(SCHEDULER_PARAM_SPECS), required: true };
    const type = check(value.type, typeSpec, joinPath(path, "type"), ctx) as keyof typeof SCHEDULER_PARAM_SPECS | undefined;
    if (type === undefined) return undefined;
    const params = check(value.params ?? {}, SCHEDULER_PARAM_SPECS[type], joinPath(path, "params"), ctx);
    return params === undefined ? undefined : { type, params };
  },
};

/** `fp16` section (DeepSpeed runtime/constants.py defaults; docs/domain.md §3). */
export const FP16_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "fp16 mixed precision with loss scaling",
  fields: {
    enabled: bool("train with fp16 params/grads and fp32 master weights", false),
    loss_scale: { kind: "number", min: 0, default: 0, doc: "0 = dynamic loss scaling; > 0 = this static scale" },
    initial_scale_power: { kind: "number", int: true, min: 0, max: 64, default: 16, doc: "dynamic scaling starts at 2^k" },
    loss_scale_window: posInt("steps without overflow before the scale doubles", 1000),
    hysteresis: posInt("overflows tolerated before the scale halves (DeepSpeed delayed_shift)", 2),
    consecutive_hysteresis: bool("refill hysteresis on every step without overflow", false),
    min_loss_scale: { kind: "number", min: 0, exclusiveMin: true, default: 1, doc: "floor of the dynamic scale" },
  },
  ignored: { auto_cast: "ZeroMoE casts explicitly; no torch autocast" },
  unsupported: { fp16_master_weights_and_grads: falseOnly("fp16 master weights and gradients are not implemented: ZeroMoE keeps fp32 master weights") },
};

/** `bf16` section. */
export const BF16_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "bf16 mixed precision (no loss scaling)",
  fields: { enabled: bool("train with bf16 params/grads and fp32 master weights", false) },
  ignored: { immediate_grad_update: "no effect in ZeroMoE", check_grad_overflow: "bf16 steps are not skipped on overflow here; max_bad_steps stops a run of non-finite losses" },
  unsupported: {
    bf16_master_weights_and_grads: falseOnly("bf16 master weights and gradients are not implemented: ZeroMoE keeps fp32 master weights"),
    bf16_optimizer_states: falseOnly("bf16 optimizer states are not implemented: ZeroMoE keeps fp32 Adam moments"),
  },
};

const OFFLOAD_COMMON = {
  device: { kind: "enum", values: ["none", "cpu", "nvme"], default: "none", doc: "where the state lives: the device, host memory (cpu) or files under nvme_path (nvme); see docs/offload.md" } as Spec,
  nvme_path: { kind: "string", nullable: true, default: null, doc: "directory for nvme offload (required when device is nvme); one subdirectory per job and rank" } as Spec,
  pin_memory: bool("page-locked host memory: Bun has none to give, so true is warned about and host buffers stay ordinary SharedArrayBuffers", false),
};

/** `zero_optimization.offload_optimizer` (DeepSpeed runtime/zero/offload_config.py). */
export const OFFLOAD_OPTIMIZER_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "optimizer-state offload (stage >= 1)",
  fields: {
    ...OFFLOAD_COMMON,
    buffer_count: posInt("nvme: host staging buffers for optimizer states (at least 3: master, m, v of one unit; 6 or more double-buffers the next unit)", 4),
    fast_init: bool("nvme: create the initial m/v files as sparse files (ftruncate) instead of writing zeros", false),
    ratio: { kind: "number", min: 0, max: 1, default: 1, doc: "fraction of the optimizer's parameter elements updated on the host (units in model order until the fraction is reached); the rest stay on the device" } as Spec,
  },
  ignored: OFFLOAD_OPTIMIZER_IGNORED,
};

/** `zero_optimization.offload_param` (stage 3 only). */
export const OFFLOAD_PARAM_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "parameter offload (stage 3 only)",
  fields: {
    ...OFFLOAD_COMMON,
    buffer_count: posInt("nvme: most parameter shards cached in host memory", 5),
    buffer_size: posInt("nvme: largest parameter shard in elements (a larger one is refused at set-up)", 1e8),
    max_in_cpu: nonNegInt("nvme: most parameter elements cached in host memory", 1e9),
  },
};

/** `aio` section: how nvme offload reads and writes its files (DeepSpeed's libaio settings,
 * runtime/swap_tensor/constants.py; here Bun's asynchronous file I/O, docs/offload.md). DeepSpeed
 * reads it with `dict.get`: unknown keys warn. */
export const AIO_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "nvme offload I/O",
  unknownKeys: "warn",
  fields: {
    block_size: posInt("bytes per I/O request (a multiple of 4096: requests are aligned to it)", 1048576),
    queue_depth: posInt("I/O requests in flight at once", 8),
    thread_count: posInt("requests each transfer is split into, submitted together (intra-request parallelism; DeepSpeed 0.19 calls it intra_op_parallelism)", 1),
    single_submit: bool("submit each block as its own request (true) or coalesce the blocks of a queue into one request (false)", false),
    overlap_events: bool("keep queue_depth requests in flight, submitting as each completes (true), or wait for a whole queue before the next (false)", true),
    use_gds: noEffectUnless(bool("GPUDirect Storage", false), (v) => v === false, "no GPUDirect Storage: NVMe transfers go through host memory"),
  },
  // DeepSpeed 0.19's name for thread_count (DeepSpeed's older configs said thread_count)
  aliases: { intra_op_parallelism: "thread_count" },
};

/** `zero_optimization` section (docs/domain.md §3 defaults). */
export const ZERO_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "ZeRO stages and their tuning",
  fields: {
    stage: { kind: "number", int: true, min: 0, max: 3, default: 0, doc: "0 = data parallel, 1 = optimizer states, 2 = + gradients, 3 = + parameters" },
    overlap_comm: bool("reduce gradient buckets while backward runs (stages 2 and 3): each bucket's reduce_scatter is issued when it fills and waited at the end of the step; stages 0 and 1 reduce once after the last micro-batch, where it has no effect", false),
    contiguous_gradients: noEffectUnless(bool("copy gradients into one contiguous buffer as produced", true), (v) => v === true, "each unit's gradient shard is always one contiguous buffer"),
    reduce_scatter: noEffect(bool("average gradients with reduce-scatter (else all-reduce)", true), "the ZeRO stage plugins choose the collective: reduce_scatter at stages 1-3, all_reduce at stage 0"),
    reduce_bucket_size: nonNegInt("elements per gradient-reduction bucket (0: one unit per bucket)", 5e8),
    allgather_bucket_size: noEffect(nonNegInt("elements per parameter all-gather bucket", 5e8), "updated shards are all-gathered one unit at a time"),
    stage3_prefetch_bucket_size: nonNegInt("parameter elements fetched ahead of use", 5e7),
    stage3_param_persistence_threshold: nonNegInt("units with fewer elements keep their parameters whole on every rank (gradients and optimizer states stay sharded); the memory check counts those parameters whole", 1e5),
    stage3_max_live_parameters: nonNegInt("most gathered parameter elements resident before releasing", 1e9),
    stage3_max_reuse_distance: nonNegInt("do not release a parameter reused within this many elements of compute", 1e9),
    stage3_gather_16bit_weights_on_model_save: bool("gather 16-bit weights when saving the model (false: save16bitModel skips)", false),
    sub_group_size: noEffect(nonNegInt("parameter elements the optimizer step processes at a time (0: one parameter tensor at a time)", 1e9), "the optimizer steps one unit at a time"),
    offload_optimizer: OFFLOAD_OPTIMIZER_SPEC,
    offload_param: OFFLOAD_PARAM_SPEC,
    // DeepSpeed's deprecated offload keys (its zero config: cpu_offload → offload_optimizer,
    // cpu_offload_param → offload_param, cpu_offload_use_pin_memory → the pin_memory of
    // offload_param/offload_optimizer): false asks for nothing, anything else is refused
    cpu_offload: deprecatedFalse("offload_optimizer.device", '"offload_optimizer": {"device": "cpu"}'),
    cpu_offload_param: deprecatedFalse("offload_param.device", '"offload_param": {"device": "cpu"} (ZeRO stage 3)'),
    cpu_offload_use_pin_memory: deprecatedFalse("offload_optimizer.pin_memory / offload_param.pin_memory", '"pin_memory" inside "offload_optimizer" / "offload_param"'),
  },
  // DeepSpeed 0.19's field names are the unprefixed ones, with the stage3_ names as aliases
  // (runtime/zero/config.py); both are accepted, and the deprecated fp16 name
  aliases: {
    stage3_gather_fp16_weights_on_model_save: "stage3_gather_16bit_weights_on_model_save",
    gather_16bit_weights_on_model_save: "stage3_gather_16bit_weights_on_model_save",
    prefetch_bucket_size: "stage3_prefetch_bucket_size",
    param_persistence_threshold: "stage3_param_persistence_threshold",
    max_live_parameters: "stage3_max_live_parameters",
    max_reuse_distance: "stage3_max_reuse_distance",
  },
  ignored: ZERO_IGNORED,
  unsupported: ZERO_UNSUPPORTED,
};

export { EXPERT_PARALLEL_SPEC } from "./spec-expert-parallel.ts";

/** `activation_checkpointing`. `enabled` is a ZeroMoE addition; its default is resolved from the
 * section's presence. */
export const ACTIVATION_CHECKPOINTING_SPEC: ObjectSpec = {
  kind: "object",
  doc: "recompute activations in backward instead of storing them (DeepSpeed reads this section with `dict.get`: unknown keys warn)",
  unknownKeys: "warn",
  fields: {
    enabled: { kind: "boolean", doc: "ZeroMoE: recompute per unit (default: true when the section is present)" },
    partition_activations: noEffectUnless(bool("DeepSpeed: partition checkpointed activations across model-parallel ranks", false), (v) => v === false, "no tensor parallelism: there is no model-parallel group to partition across"),
    cpu_checkpointing: noEffectUnless(bool("DeepSpeed: keep checkpointed activations in host memory", false), (v) => v === false, "each unit's checkpointed input stays in device memory"),
    contiguous_memory_optimization: noEffectUnless(bool("DeepSpeed: copy checkpoints into one contiguous buffer", false), (v) => v === false, "checkpointed inputs are the backend's own buffers"),
    number_checkpoints: noEffectUnless({ kind: "number", int: true, min: 1, nullable: true, default: null, doc: "DeepSpeed: size of the contiguous checkpoint buffer" }, (v) => v === null, "every unit (decoder layer) is one checkpoint"),
    synchronize_checkpoint_boundary: noEffectUnless(bool("DeepSpeed: device synchronize at each checkpoint boundary", false), (v) => v === false, "kernels of one rank already run in order"),
    profile: noEffectUnless(bool("DeepSpeed: time the checkpointed forward and recomputation", false), (v) => v === false, "not timed separately: wall_clock_breakdown's backward time includes the recomputation"),
  },
};

/** `flops_profiler`. */
export const FLOPS_PROFILER_SPEC: ObjectSpec = {
  kind: "object",
  default: {},
  doc: "count FLOPs of one step",
  fields: {
    enabled: bool("profile one step", false),
    profile_step: { kind: "number", int: true, min: -1, default: 1, doc: "which step to profile (-1 or 0: none, as in DeepSpeed no step matches)" },
    module_depth: { kind: "number", int: true, min: -1, default: -1, doc: "depth of the per-module report (-1 = all)" },
    top_modules: posInt("modules listed per depth", 1),
    detailed: bool("per-module detail", true),
    output_file: { kind: "string", nullable: true, default: null, doc: "write the report here (null = stdout)" },
  },
  ignored: { recompute_fwd_factor: "no effect in ZeroMoE" },
  // DeepSpeed reads this section with get_scalar_param: a key it does not know is dropped
  unknownKeys: "warn",
};

/** Top-level DeepSpeed keys and their specs (batch keys have no static default: see the batch rule). */
export const DEEPSPEED_FIELDS: Readonly<Record<string, Spec>> = {
  train_batch_size: posInt("global batch: micro × accumulation × dp world size"),
  train_micro_batch_size_per_gpu: posInt("sequences per rank per forward/backward"),
  gradient_accumulation_steps: posInt("micro-batches accumulated per optimizer step"),
  optimizer: OPTIMIZER_SPEC,
  scheduler: SCHEDULER_SPEC,
  gradient_clipping: { kind: "number", min: 0, default: 0, doc: "clip the global gradient L2 norm to this (0 = off)" },
  fp16: FP16_SPEC,
  bf16: BF16_SPEC,
  zero_optimization: ZERO_SPEC,
  expert_parallel: EXPERT_PARALLEL_SPEC,
  activation_checkpointing: ACTIVATION_CHECKPOINTING_SPEC,
  aio: AIO_SPEC,
  steps_per_print: posInt("log every N steps", 10),
  wall_clock_breakdown: bool("every steps_per_print steps, print each rank's step time by phase (forward, backward, reduce, optimizer, gather, all_to_all, transfers) with its share", false),
  flops_profiler: FLOPS_PROFILER_SPEC,
  tensorboard: TENSORBOARD_SPEC,
  csv_monitor: CSV_MONITOR_SPEC,
  comms_logger: COMMS_LOGGER_SPEC,
};

/** Old/alternative top-level DeepSpeed names. */
export const DEEPSPEED_ALIASES: Readonly<Record<string, string>> = { bfloat16: "bf16" };

export { DEEPSPEED_IGNORED, DEEPSPEED_UNSUPPORTED } from "./spec-deepspeed-other.ts";

/** Names of every DeepSpeed key (fields, aliases, ignored) accepted at the top of a job file or in
 * a `--deepspeed` file. */
export const DEEPSPEED_TOP_KEYS: readonly string[] = [
  ...Object.keys(DEEPSPEED_FIELDS),
  ...Object.keys(DEEPSPEED_ALIASES),
  ...Object.keys(DEEPSPEED_IGNORED),
  ...Object.keys(DEEPSPEED_UNSUPPORTED),
];
