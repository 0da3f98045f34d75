/**
 * The fully-resolved, typed job configuration produced by `resolveJobConfig` / `loadJobConfig`.
 * Every field is present (defaults filled in, cross-field defaults resolved), so consumers never
 * re-apply defaults. Key names are those of the JSON file: Hugging Face names in `model`,
 * DeepSpeed's names at top level (docs/domain.md §3), ZeroMoE's own names in `data`, `moe`, `checkpoint`.
 * See docs/config.md for the meaning, type and default of each key.
 */

/** Hugging Face decoder config shared by `llama` and `mixtral` (transformers' LlamaConfig /
 * MixtralConfig names). Null-valued HF options are resolved: `num_key_value_heads` and `head_dim`
 * are always numbers here. */
/** RoPE scaling as Transformers reads it (models/rope-scaling.ts has the formulas). */
export type RopeScalingConfig =
  | { rope_type: "linear" | "dynamic"; factor: number }
  | { rope_type: "llama3"; factor: number; low_freq_factor: number; high_freq_factor: number; original_max_position_embeddings: number }
  /** YaRN (Peng et al. 2023): the optional keys as given (absent: Transformers' defaults). */
  | { rope_type: "yarn"; factor: number; original_max_position_embeddings?: number; attention_factor?: number; beta_fast?: number; beta_slow?: number; mscale?: number; mscale_all_dim?: number; truncate?: boolean }
  /** LongRoPE (Phi-3): one rescale factor per frequency (head_dim / 2 each) for sequences within and past the original context. */
  | { rope_type: "longrope"; short_factor: number[]; long_factor: number[]; factor?: number; attention_factor?: number; original_max_position_embeddings?: number };

export interface ModelConfigBase {
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  /** Grouped-query attention: K/V heads; HF default when null: `num_attention_heads` (llama). */
  num_key_value_heads: number;
  /** Per-head size; HF default when null: `hidden_size / num_attention_heads`. */
  head_dim: number;
  /** Only "silu" (SwiGLU) is implemented. */
  hidden_act: "silu";
  rms_norm_eps: number;
  rope_theta: number;
  /** Hugging Face rope scaling (config.json `rope_scaling`, or `rope_parameters` with a rope_type
   * other than "default"); null: unscaled RoPE. Optional in the type for hand-built configs. */
  rope_scaling?: RopeScalingConfig | null;
  max_position_embeddings: number;
  tie_word_embeddings: boolean;
  /** Std-dev of the normal init of weights (HF `_init_weights`). */
  initializer_range: number;
  attention_bias: boolean;
  attention_dropout: number;
  bos_token_id: number | null;
  eos_token_id: number | null;
  pad_token_id: number | null;
  /** `"from_pretrained": DIR`: the Hugging Face checkpoint directory (absolute) whose config.json
   * this config came from and whose weights initialise the model (config/resolve-model.ts
   * `applyHubModel`). Absent otherwise. */
  from_pretrained?: string;
}

/** Dense Llama (HF LlamaConfig). */
export interface LlamaConfig extends ModelConfigBase {
  model_type: "llama";
  mlp_bias: boolean;
}

/** Sparse Mixtral (HF MixtralConfig). */
export interface MixtralConfig extends ModelConfigBase {
  model_type: "mixtral";
  num_local_experts: number;
  num_experts_per_tok: number;
  router_aux_loss_coef: number;
  output_router_logits: boolean;
  router_jitter_noise: number;
  sliding_window: number | null;
}

/** Sparse Qwen3-MoE (HF Qwen3MoeConfig, Transformers 5 names: `num_local_experts`, older
 * configs' `num_experts` is accepted as its alias). Layer l has experts iff l is not in
 * `mlp_only_layers` and (l + 1) % `decoder_sparse_step` == 0; other layers have a dense SwiGLU MLP
 * of `intermediate_size`. */
export interface Qwen3MoeConfig extends ModelConfigBase {
  model_type: "qwen3_moe";
  num_local_experts: number;
  num_experts_per_tok: number;
  /** Hidden width of each expert's SwiGLU. */
  moe_intermediate_size: number;
  /** Renormalise the top-k probabilities to sum 1 (false: use them as they are). */
  norm_topk_prob: boolean;
  decoder_sparse_step: number;
  mlp_only_layers: number[];
  router_aux_loss_coef: number;
  output_router_logits: boolean;
  use_sliding_window: boolean;
  sliding_window: number | null;
}

/** Sparse Qwen2-MoE (HF Qwen2MoeConfig; its config.json writes the expert count as `num_experts`,
 * accepted as the alias of `num_local_experts`). Layers as Qwen3-MoE (mlp_only_layers,
 * decoder_sparse_step); q/k/v projections with biases when `qkv_bias`; every MoE layer also has a
 * shared SwiGLU expert of `shared_expert_intermediate_size` scaled by sigmoid(shared_expert_gate·x). */
export interface Qwen2MoeConfig extends ModelConfigBase {
  model_type: "qwen2_moe";
  num_local_experts: number;
  num_experts_per_tok: number;
  moe_intermediate_size: number;
  shared_expert_intermediate_size: number;
  norm_topk_prob: boolean;
  qkv_bias: boolean;
  decoder_sparse_step: number;
  mlp_only_layers: number[];
  router_aux_loss_coef: number;
  output_router_logits: boolean;
  use_sliding_window: boolean;
  sliding_window: number | null;
}

/** Keys DeepSeek-V2 and -V3 share (HF DeepseekV2Config / DeepseekV3Config; config.json writes
 * the routed expert count as `n_routed_experts`, accepted as the alias of `num_local_experts`).
 * Layers l < first_k_dense_replace have a dense SwiGLU of intermediate_size, the others routed
 * experts of moe_intermediate_size plus shared experts (moe_intermediate_size · n_shared_experts).
 * Attention is multi-head latent attention (q_lora_rank, kv_lora_rank, qk_nope_head_dim,
 * qk_rope_head_dim, v_head_dim); `head_dim` is qk_rope_head_dim (the RoPE width). */
export interface DeepseekConfigBase extends ModelConfigBase {
  num_local_experts: number;
  num_experts_per_tok: number;
  moe_intermediate_size: number;
  /** Shared experts per MoE layer (their SwiGLU width is moe_intermediate_size × this); null: none. */
  n_shared_experts: number | null;
  first_k_dense_replace: number;
  /** Expert groups for group-limited routing (null: none). */
  n_group: number | null;
  topk_group: number | null;
  routed_scaling_factor: number;
  norm_topk_prob: boolean;
  /** Rank of the low-rank query projection (null: a full q_proj). */
  q_lora_rank: number | null;
  kv_lora_rank: number;
  qk_rope_head_dim: number;
  qk_nope_head_dim: number;
  v_head_dim: number;
  /** qk_nope_head_dim + qk_rope_head_dim as config.json gives it (null: not given). */
  qk_head_dim: number | null;
  /** Weight of the moe section's DeepSpeed aux loss (switch/gshard); Hugging Face's DeepSeek adds none. */
  router_aux_loss_coef: number;
  /** Always false: Hugging Face's DeepSeek computes no load-balancing loss. */
  output_router_logits: boolean;
}

/** DeepSeek-V3 (HF DeepseekV3Config): sigmoid scores, e_score_correction_bias for the choice,
 * group-limited top-k by the sum of each group's two best, norm_topk_prob, routed_scaling_factor. */
export interface DeepseekV3Config extends DeepseekConfigBase {
  model_type: "deepseek_v3";
  /** RoPE on interleaved pairs (x[2i], x[2i+1]) instead of halves. */
  rope_interleave: boolean;
}

/** DeepSeek-V2 (HF DeepseekV2Config): softmax scores, greedy or group-limited greedy (groups by
 * their best expert) top-k, routed_scaling_factor; RoPE on interleaved pairs. */
export interface DeepseekV2Config extends DeepseekConfigBase {
  model_type: "deepseek_v2";
  topk_method: "greedy" | "group_limited_greedy";
  mlp_bias: boolean;
}

/** The model configs with MoE layers. */
export type SparseModelConfig = MixtralConfig | Qwen3MoeConfig | Qwen2MoeConfig | DeepseekV3Config | DeepseekV2Config;

export type ModelConfig = LlamaConfig | SparseModelConfig;

/** Dataset and tokenization. */
export interface DataConfig {
  /** "moby-dick" | "sotu" | a path to .txt, .jsonl (`text` field per line, or chat records: `format`), .parquet (a `text` column, or chat records) or uint16 .bin tokens. */
  dataset: string;
  /** "byte" | "gpt2" | a path to a Hugging Face tokenizer.json or a directory holding one. */
  tokenizer: string;
  /** Tokens per training sequence (inputs); targets are the same window shifted by one. */
  seq_len: number;
  /** Fraction of the token stream (the tail) held out for validation, in [0, 0.5]. */
  validation_fraction: number;
  /** Records of a .jsonl / .parquet dataset (chat-formats.ts; the four chat keys are always set in a resolved job, absent = their defaults): "auto" | "text" | "messages" | "alpaca" | "sharegpt". */
  format?: "auto" | "text" | "messages" | "alpaca" | "sharegpt";
  /** Jinja chat template file, or the name of one of tokenizer_config.json's named templates; null: its chat_template. */
  chat_template?: string | null;
  /** Chat data: labels on every token, not only the assistant turns. */
  train_on_prompt?: boolean;
  /** Chat data: pack several examples per row (segments) instead of padding one per row. */
  packing?: boolean;
}

/** Checkpointing. */
export interface CheckpointConfig {
  /** Directory of tags; null disables saving. */
  dir: string | null;
  /** Save every N optimizer steps (0 = only at the end when `dir` is set). */
  save_interval: number;
  /** Keep only the newest N tags (0 = keep all). */
  keep_last: number;
}

/** Mixture-of-Experts routing (ZeroMoE section; DeepSpeed MoE layer names where they exist). */
export interface MoeConfig {
  ep_size: number;
  /** Expert tensor parallelism: ranks each expert's weights are split over (docs/moe.md). */
  etp_size: number;
  capacity_factor: number;
  eval_capacity_factor: number;
  min_capacity: number;
  drop_tokens: boolean;
  k: number;
  aux_loss: "switch" | "gshard" | "mixtral";
  aux_loss_coef: number;
  z_loss_coef: number;
  noisy_gate_policy: "Jitter" | "RSample" | null;
  /** Clamp router logits to [-v, v] before softmax; null = no clamp. */
  router_logits_clamp: number | null;
  placement: "contiguous" | "round_robin" | "balanced" | "co_occurrence" | "topology";
  /** Topology file (groups of world ranks) for placement "topology", or null. */
  topology: string | null;
  /** A --summary JSON whose moe statistics seed the placement at start, or null. */
  routing_log: string | null;
  /** Report an expert as dead after this many steps without tokens (0 = off). */
  dead_expert_steps: number;
  /** Live re-placement every N steps (0 = off; plugins/moe/src/live-replace.ts). */
  replace_every: number;
}

/** DeepSpeed `optimizer` section, resolved. */
export interface OptimizerConfig {
  type: "Adam" | "AdamW" | "Lamb";
  params: {
    lr: number;
    betas: [number, number];
    eps: number;
    weight_decay: number;
    /** Decoupled weight decay (AdamW). Always true for type AdamW; unused by Lamb (its decay enters the update). */
    adam_w_mode: boolean;
    /** Lamb only (DeepSpeed FusedLamb; resolve.ts fills the defaults for Lamb): step size lr·√(1−β2^t)/(1−β1^t). Default true. */
    bias_correction?: boolean;
    /** Lamb only: divide gradients by (‖g‖ + 1e-6)/max_grad_norm when that exceeds 1; 0 = off. Default 0. */
    max_grad_norm?: number;
    /** Lamb only: upper clamp of the trust ratio ‖p‖/‖u‖. Default 10. */
    max_coeff?: number;
    /** Lamb only: lower clamp of the trust ratio. Default 0.01. */
    min_coeff?: number;
    /** Lamb only: denominator √(v + eps) instead of √v + eps. Default false. */
    eps_inside_sqrt?: boolean;
  };
}

export type WarmupType = "log" | "linear";

export interface WarmupLRParams {
  warmup_min_lr: number;
  warmup_max_lr: number;
  warmup_num_steps: number;
  warmup_type: WarmupType;
}
export interface WarmupDecayLRParams extends WarmupLRParams {
  total_num_steps: number;
}
export interface WarmupCosineLRParams {
  total_num_steps: number;
  warmup_min_ratio: number;
  warmup_num_steps: number;
  cos_min_ratio: number;
  warmup_type: WarmupType;
}

/** DeepSpeed `scheduler` section, resolved (discriminated by `type`). */
export type SchedulerConfig =
  | { type: "WarmupLR"; params: WarmupLRParams }
  | { type: "WarmupDecayLR"; params: WarmupDecayLRParams }
  | { type: "WarmupCosineLR"; params: WarmupCosineLRParams }
  | { type: "OneCycle"; params: OneCycleParams }
  | { type: "LRRangeTest"; params: LRRangeTestParams };

/** DeepSpeed OneCycle params (optim/cyclic-schedulers.ts). */
export interface OneCycleParams {
  cycle_min_lr: number;
  cycle_max_lr: number;
  decay_lr_rate: number;
  cycle_first_step_size: number;
  /** null: cycle_first_step_size. */
  cycle_second_step_size: number | null;
  cycle_first_stair_count: number;
  /** null: cycle_first_stair_count. */
  cycle_second_stair_count: number | null;
  decay_step_size: number;
  cycle_momentum: boolean;
  cycle_min_mom: number;
  cycle_max_mom: number;
  decay_mom_rate: number;
}

/** DeepSpeed LRRangeTest params (optim/cyclic-schedulers.ts). */
export interface LRRangeTestParams {
  lr_range_test_min_lr: number;
  lr_range_test_step_size: number;
  lr_range_test_step_rate: number;
  lr_range_test_staircase: boolean;
}

export interface Fp16Config {
  enabled: boolean;
  /** 0 = dynamic scaling; > 0 = static scale. */
  loss_scale: number;
  initial_scale_power: number;
  loss_scale_window: number;
  hysteresis: number;
  consecutive_hysteresis: boolean;
  min_loss_scale: number;
}

interface OffloadCommonConfig {
  device: "none" | "cpu" | "nvme";
  nvme_path: string | null;
  pin_memory: boolean;
  buffer_count: number;
}
export interface OffloadOptimizerConfig extends OffloadCommonConfig {
  fast_init: boolean;
  /** Fraction of optimizer elements updated on the host (1 = all). */
  ratio: number;
}
export interface OffloadParamConfig extends OffloadCommonConfig {
  buffer_size: number;
  max_in_cpu: number;
}

/** DeepSpeed `aio` section (nvme offload I/O). */
export interface AioConfig {
  block_size: number;
  queue_depth: number;
  thread_count: number;
  single_submit: boolean;
  overlap_events: boolean;
  /** Accepted; no GPUDirect Storage here (a warning when true). */
  use_gds?: boolean;
}

export interface ZeroConfig {
  stage: 0 | 1 | 2 | 3;
  overlap_comm: boolean;
  contiguous_gradients: boolean;
  reduce_scatter: boolean;
  reduce_bucket_size: number;
  allgather_bucket_size: number;
  stage3_prefetch_bucket_size: number;
  stage3_param_persistence_threshold: number;
  stage3_max_live_parameters: number;
  stage3_max_reuse_distance: number;
  stage3_gather_16bit_weights_on_model_save: boolean;
  sub_group_size: number;
  offload_optimizer: OffloadOptimizerConfig;
  offload_param: OffloadParamConfig;
}

/** `expert_parallel` (AutoEP; config/spec-expert-parallel.ts, docs/config.md). After resolution
 * with `enabled`, `preset_model`, `top_k`, `route_norm` and `routed_scaling_factor` hold the
 * model's values where the job left them to the preset ("auto"/null). */
export interface ExpertParallelConfig {
  enabled: boolean;
  autoep_size: number;
  preset_model: "mixtral" | "qwen3_moe" | "qwen2_moe" | "deepseek_v2" | "deepseek_v3" | null;
  moe_layer_pattern: string | null;
  router_pattern: string | null;
  expert_pattern: string | null;
  use_grouped_mm: boolean;
  grouped_mm_backend: "auto" | "torch" | "cutlass" | "sequential";
  route_norm: boolean | null;
  route_scale: number;
  score_apply: "auto" | "pre" | "post";
  num_expert_groups: number | null;
  num_limited_groups: number | null;
  score_func: "auto" | "softmax" | "sigmoid";
  top_k: number | "auto";
  load_balance_coeff: number | null;
  routed_scaling_factor: number | "auto";
  expert_w1: string | null;
  expert_w2: string | null;
  /** Absent: the preset's; null: fused gate_up_proj. */
  expert_w3?: string | null;
  num_experts_attr: string | null;
  top_k_attr: string | null;
  has_shared_experts: boolean | null;
  shared_experts_pattern: string | null;
}

export interface ActivationCheckpointingConfig {
  /** Recompute each unit's activations in backward. True when the section is present, unless set. */
  enabled: boolean;
  partition_activations: boolean;
  cpu_checkpointing: boolean;
  contiguous_memory_optimization: boolean;
  number_checkpoints: number | null;
  synchronize_checkpoint_boundary: boolean;
  profile: boolean;
}

export interface FlopsProfilerConfig {
  enabled: boolean;
  profile_step: number;
  module_depth: number;
  top_modules: number;
  detailed: boolean;
  output_file: string | null;
}

/** The whole job. */
export interface JobConfig {
  model: ModelConfig;
  data: DataConfig;
  seed: number;
  backend: "auto" | "webgpu" | "cpu";
  /** Number of ranks (= data-parallel world size; no tensor/pipeline parallelism). */
  world_size: number;
  /** Optimizer steps to run. */
  steps: number;
  /** Hugging Face parameter-name patterns (globs or module names) of frozen parameters (engine/freeze.ts). */
  freeze: string[];
  /** Evaluate on the validation split every N steps (0 = never). */
  eval_interval: number;
  /** Validation micro-batches per rank per evaluation. */
  eval_batches: number;
  checkpoint: CheckpointConfig;
  /** Stop after this many consecutive bad steps (train/divergence.ts); 0 = never. */
  max_bad_steps: number;
  /** Device memory budget per rank, bytes (`max_device_memory`, or `--max-device-memory`); null =
   * the backend's own limits. The memory check and the backend's allocator honour it. */
  max_device_memory: number | null;
  /** PaLM z-loss weight on the LM head (`lm_z_loss_coef`; the model's `lmZLossCoef`); 0 = off. */
  lm_z_loss_coef: number;
  /** Third-party plugins: package names or paths. */
  plugins: string[];
  /** MoE routing; null for a dense model. */
  moe: MoeConfig | null;

  // ---- DeepSpeed keys ----
  train_batch_size: number;
  train_micro_batch_size_per_gpu: number;
  gradient_accumulation_steps: number;
  optimizer: OptimizerConfig;
  /** null: constant lr = optimizer.params.lr. */
  scheduler: SchedulerConfig | null;
  /** Max global L2 norm of gradients; 0 disables clipping. */
  gradient_clipping: number;
  fp16: Fp16Config;
  bf16: { enabled: boolean };
  zero_optimization: ZeroConfig;
  aio: AioConfig;
  expert_parallel: ExpertParallelConfig;
  activation_checkpointing: ActivationCheckpointingConfig;
  steps_per_print: number;
  wall_clock_breakdown: boolean;
  flops_profiler: FlopsProfilerConfig;
  /** TensorBoard event files (core/src/observe/tensorboard-writer.ts). */
  tensorboard: MonitorSectionConfig;
  /** DeepSpeed's CSV monitor files (core/src/observe/csv-monitor.ts). */
  csv_monitor: MonitorSectionConfig;
  /** The communication logger (core/src/observe/comms-logger.ts). */
  comms_logger: CommsLoggerSectionConfig;
}

/** `tensorboard` / `csv_monitor` keys (DeepSpeed's monitor config). */
export interface MonitorSectionConfig {
  enabled: boolean;
  /** "" = DeepSpeed's default folder under the home directory. */
  output_path: string;
  job_name: string;
}

/** `comms_logger` keys (DeepSpeed's). */
export interface CommsLoggerSectionConfig {
  enabled: boolean;
  verbose: boolean;
  prof_all: boolean;
  debug: boolean;
  prof_ops: string[];
}

/** Result of resolving a job: the config plus non-fatal warnings (ignored keys etc.). */
export interface ResolvedJob {
  config: JobConfig;
  warnings: string[];
}
