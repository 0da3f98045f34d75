/**
 * DeepSpeed 0.19 keys that ZeroMoE does not act on, each classified as DeepSpeed's own config
 * classes read it (deepspeed/runtime/config.py `_initialize_params`, runtime/constants.py,
 * runtime/zero/config.py, runtime/precision_config.py, runtime/tensor_parallel/config.py,
 * monitor/config.py, compile/config.py, utils/config.py, elasticity, nebula, datastates,
 * data_pipeline, compression):
 * - ignored: accepted with one warning naming the key and why it has no effect here;
 * - unsupported: accepted while the value asks for nothing (the feature off), refused with the
 *   reason otherwise — the feature is missing here (ZeRO++ quantisation, AutoTP, compression, ...).
 * The keys ZeroMoE acts on are the fields of spec-deepspeed.ts. docs/config.md's table of every
 * DeepSpeed key is generated from these specs (docs.ts).
 */
import { isPlainObject, type Unsupported } from "./schema.ts";

/** Off when the value is `false` (or absent). */
export function falseOnly(why: string): Unsupported {
  return { off: (v) => v === undefined || v === false, offDoc: "false", why };
}

/** Off when the value is absent or `null` (DeepSpeed turns the feature on by the key's presence). */
export function absentOnly(why: string): Unsupported {
  return { off: (v) => v === undefined || v === null, offDoc: "absent or null", why };
}

/** True when `v` (a section) turns nothing on: no `enabled: true` at any depth. */
export function nothingEnabled(v: unknown): boolean {
  if (Array.isArray(v)) return v.every(nothingEnabled);
  if (!isPlainObject(v)) return true;
  for (const [k, x] of Object.entries(v)) {
    if (k === "enabled" && x !== false && x !== undefined && x !== null) return false;
    if (!nothingEnabled(x)) return false;
  }
  return true;
}

/** Off when the section enables nothing (every `enabled` inside it false or absent). */
export function sectionOff(why: string): Unsupported {
  return { off: (v) => v === undefined || v === null || nothingEnabled(v), offDoc: "absent, or every `enabled` in it false", why };
}

/** Off when the value is one of `values` (numbers or strings, strings case-insensitively). */
export function oneOf(values: readonly (string | number | null)[], why: string): Unsupported {
  const norm = (x: unknown): unknown => (typeof x === "string" ? x.toLowerCase() : x);
  return {
    off: (v) => v === undefined || values.some((a) => norm(a) === norm(v)),
    offDoc: values.map((x) => JSON.stringify(x)).join(" or "),
    why,
  };
}

/** `tensor_parallel` (runtime/tensor_parallel/config.py TPTrainingConfig): AutoTP at a size of 1 or
 * 0 (off) asks for nothing. */
function tensorParallelOff(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (!isPlainObject(v)) return false;
  const size = (x: unknown): boolean => x === undefined || x === 0 || x === 1;
  const tp = isPlainObject(v.tp) ? v.tp : isPlainObject(v.tensor_parallel) ? v.tensor_parallel : {};
  return size(v.autotp_size) && size(tp.tp_size);
}

/** Top-level DeepSpeed keys accepted and ignored (with the reason, shown as a warning). */
export const DEEPSPEED_IGNORED: Readonly<Record<string, string>> = {
  fp32_allreduce: "reductions are always in fp32 here",
  prescale_gradients: "gradients are averaged in fp32 in a fixed order",
  gradient_predivide_factor: "gradients are averaged in fp32 in a fixed order",
  sparse_gradients: "no sparse embedding gradients",
  communication_data_type: "communication is fp32",
  seq_parallel_communication_data_type: "no sequence parallelism",
  zero_allow_untested_optimizer: "the optimizers here (Adam, AdamW, Lamb) are ZeroMoE's own",
  zero_force_ds_cpu_optimizer: "the optimizers here (Adam, AdamW, Lamb) are ZeroMoE's own",
  managed_gradient_accumulation: "the engine always accumulates the micro-batches of a step itself",
  disable_allgather: "updated ZeRO shards are always all-gathered",
  dump_state: "no effect in ZeroMoE",
  memory_breakdown: "memory is always reported per tag",
  vocabulary_size: "DeepSpeed only warns about alignment with it; the model's vocab_size is what counts",
  graph_harvesting: "no CUDA graphs: kernels are WebGPU dispatches",
  data_types: "gradients accumulate in fp32",
  autotuning: "no autotuner (DeepSpeed also tunes only under its `--autotuning` launcher)",
  pipeline: "no pipeline parallelism (DeepSpeed reads this section only for a PipelineModule)",
  dataloader_drop_last: "ZeroMoE's data loader only makes whole micro-batches",
  log_level: "ZeroMoE prints rank 0's progress lines and warnings",
  compile: "no torch.compile or DeepCompile: the kernels are ZeroMoE's own",
  timers: "step times are always measured (wall_clock_breakdown prints them)",
};

/** Top-level DeepSpeed keys whose feature ZeroMoE lacks. */
export const DEEPSPEED_UNSUPPORTED: Readonly<Record<string, Unsupported>> = {
  // refused when enabled (a run that asked for W&B and got nothing read as lost metrics): both log
  // through their own servers over the network, which a training run here does not assume
  wandb: sectionOff("Weights & Biases logging is not implemented (it sends the metrics to a W&B server over the network); write tensorboard (or csv_monitor) files instead: the same metrics, and a TensorBoard log directory can be uploaded to W&B afterwards with `wandb sync`"),
  comet: sectionOff("Comet logging is not implemented (it sends the metrics to a Comet server over the network); write tensorboard or csv_monitor files instead"),
  amp: sectionOff("NVIDIA apex AMP is not available: use fp16 or bf16"),
  torch_autocast: sectionOff("torch.autocast mixed precision is not available: use bf16 or fp16 (ZeroMoE casts explicitly)"),
  compression_training: sectionOff("DeepSpeed Compression (quantization-aware training, pruning, layer reduction) is not implemented"),
  quantize_training: sectionOff("MoQ quantize-aware training is not implemented"),
  sparse_attention: absentOnly("block-sparse attention is not implemented: attention is dense (causal, or sliding-window where the model says so)"),
  progressive_layer_drop: sectionOff("progressive layer dropping is not implemented"),
  curriculum_learning: sectionOff("curriculum learning (sequences ordered and truncated by difficulty) is not implemented"),
  data_efficiency: sectionOff("data efficiency (curriculum data sampling, random-LTD) is not implemented"),
  hybrid_engine: sectionOff("the RLHF hybrid (training + inference) engine is not implemented"),
  elasticity: sectionOff("elastic training is not implemented; ZeroMoE checkpoints reshard on load for a new world size instead"),
  nebula: sectionOff("the Nebula checkpoint service is not available"),
  datastates_ckpt: falseOnly("the DataStates asynchronous checkpoint engine is not available: ZeroMoE writes its own sharded checkpoints"),
  weight_quantization: absentOnly("quantized weights (ZeRO-Inference int4/int8) are not implemented"),
  tensor_parallel: {
    off: tensorParallelOff,
    offDoc: "autotp_size and tp.tp_size 0 or 1",
    why: "AutoTP tensor parallelism is not implemented: ZeroMoE shards data-parallel (ZeRO) and expert-parallel (expert_parallel / moe.ep_size)",
  },
  gradient_allreduce_op: oneOf(["mean"], 'gradients are averaged over the data-parallel world; "sum" is not implemented'),
  use_data_before_expert_parallelism: falseOnly("expert-parallel groups are contiguous ranks here; the data-first rank order is not implemented"),
};

/** `zero_optimization` keys accepted and ignored (DeepSpeed 0.19 runtime/zero/config.py). */
export const ZERO_IGNORED: Readonly<Record<string, string>> = {
  allgather_partitions: "ZeroMoE always all-gathers",
  use_multi_rank_bucket_allreduce: "gradients are reduce-scattered per bucket",
  round_robin_gradients: "no effect in ZeroMoE",
  elastic_checkpoint: "no effect in ZeroMoE (checkpoints reshard on load)",
  ignore_unused_parameters: "unused parameters simply get zero gradients",
  load_from_fp32_weights: "ZeroMoE always restores fp32 master weights",
  grad_hooks: "no effect in ZeroMoE",
  legacy_stage1: "no effect in ZeroMoE",
  memory_efficient_linear: "no effect in ZeroMoE",
  stage3_model_persistence_threshold: "the total of whole-kept parameters is not capped; lower stage3_param_persistence_threshold instead",
  model_persistence_threshold: "the total of whole-kept parameters is not capped; lower stage3_param_persistence_threshold instead",
  stage3_module_granularity_threshold: "ZeRO-3 gathers whole units (decoder layers), never finer modules",
  module_granularity_threshold: "ZeRO-3 gathers whole units (decoder layers), never finer modules",
  stage3_use_all_reduce_for_fetch_params: "parameters are fetched with all_gather",
  use_all_reduce_for_fetch_params: "parameters are fetched with all_gather",
  stage3_allgather_sequential: "each unit is gathered by one all_gather",
  allgather_sequential: "each unit is gathered by one all_gather",
  pipeline_loading_checkpoint: "no pipeline parallelism",
  override_module_apply: "no torch modules",
  log_trace_cache_warnings: "no trace cache: the prefetch order is the unit order",
  enable_sanity_checks: "no effect in ZeroMoE",
  save_muon_momentum_buffer_in_memory: "no Muon optimizer",
  leaf_module: "ZeRO-3's units are whole decoder layers already: there are no submodule hooks to stop at",
};

/** `zero_optimization` keys whose feature ZeroMoE lacks. */
export const ZERO_UNSUPPORTED: Readonly<Record<string, Unsupported>> = {
  zero_quantized_weights: falseOnly("ZeRO++ quantized weight all-gather (qwZ) is not implemented: collectives send exact values"),
  zero_quantized_nontrainable_weights: falseOnly("ZeRO++ quantized frozen weights are not implemented: collectives send exact values"),
  zero_quantized_gradients: falseOnly("ZeRO++ quantized gradient reduce (qgZ) is not implemented: collectives send exact values"),
  zero_hpz_partition_size: oneOf([0, 1], "ZeRO++ hierarchical partitioning (hpZ, a secondary weight copy per node) is not implemented"),
  zeropp_loco_param: absentOnly("LoCo-ZeRO++ error-feedback quantization is not implemented"),
  mics_shard_size: { off: (v) => v === undefined || (typeof v === "number" && v <= 0), offDoc: "-1 or 0", why: "MiCS (sharding within sub-groups, replicating across them) is not implemented" },
  mics_hierarchical_params_gather: falseOnly("MiCS is not implemented"),
  zenflow: absentOnly("ZenFlow (stalled CPU updates of unimportant gradients) is not implemented"),
};

/** `zero_optimization.offload_optimizer` keys accepted and ignored. */
export const OFFLOAD_OPTIMIZER_IGNORED: Readonly<Record<string, string>> = {
  pipeline_read: "host transfers are issued as one stream per unit",
  pipeline_write: "host transfers are issued as one stream per unit",
  pipeline: "host transfers are issued as one stream per unit",
  super_offload: "no Superchip-specific path: the host optimizer is the same on every machine",
  cpuadam_cores_perc: "the host optimizer runs on the rank's own thread",
};

/** DeepSpeed's own keys inside `checkpoint` (runtime/constants.py, runtime/model_checkpointing):
 * accepted and ignored next to the job's dir / save_interval / keep_last. */
export const CHECKPOINT_DEEPSPEED_IGNORED: Readonly<Record<string, string>> = {
  tag_validation: "DeepSpeed key; tags are validated by the manifest checksum",
  load_universal: "DeepSpeed key; ZeroMoE checkpoints reshard on load (any world size, stage or layout)",
  use_node_local_storage: "DeepSpeed key; no effect",
  parallel_write: "DeepSpeed key; every rank writes its own shards",
  checkpoint_serialization: "DeepSpeed key; shards are safetensors files",
  writer: "DeepSpeed key; shards are written by ZeroMoE's own writer",
};
