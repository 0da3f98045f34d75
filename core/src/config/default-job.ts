/**
 * The built-in job that `bun run train` runs with no `--config`: a small Mixtral (4 experts, top-2)
 * on Moby Dick with byte tokens, sized to train in minutes on 2 CPU cores with the pure TypeScript
 * backend. It is a job file (same keys as a user's JSON), resolved like any other by
 * `resolveJobConfig`; the numbers may be tuned by the engine owner.
 */

function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

/** Raw job JSON of the default run: 262,976 parameters (164,672 active per token; see
 * countParameters), 64-token sequences, 8 per micro-batch, 500 steps. Tuned 2026-11-29 on 2 CPU
 * cores (cpu backend, lr 3e-3 cosine): 300 steps end at loss 2.26 / val 2.21, 500 steps at
 * 2.05 / 2.06 (45–90 s depending on load); lr 6e-3 was worse at both lengths (2.31, 2.14). */
export const DEFAULT_JOB = deepFreeze({
  model: {
    model_type: "mixtral",
    vocab_size: 256,
    hidden_size: 64,
    intermediate_size: 128,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 4,
    rms_norm_eps: 1e-5,
    rope_theta: 10000,
    max_position_embeddings: 256,
    tie_word_embeddings: false,
    initializer_range: 0.02,
    num_local_experts: 4,
    num_experts_per_tok: 2,
    router_aux_loss_coef: 0.01,
    output_router_logits: true,
  },
  data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 64, validation_fraction: 0.05, format: "auto", chat_template: null, train_on_prompt: false, packing: false },
  seed: 1234,
  backend: "auto",
  world_size: 1,
  steps: 500,
  eval_interval: 50,
  eval_batches: 4,
  checkpoint: { dir: null, save_interval: 0, keep_last: 2 },
  train_micro_batch_size_per_gpu: 8,
  gradient_accumulation_steps: 1,
  optimizer: { type: "AdamW", params: { lr: 3e-3, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0.1 } },
  scheduler: {
    type: "WarmupCosineLR",
    params: { warmup_num_steps: 30, warmup_type: "linear", warmup_min_ratio: 0, cos_min_ratio: 0.1 },
  },
  gradient_clipping: 1.0,
  zero_optimization: { stage: 0 },
  steps_per_print: 10,
}) as Readonly<Record<string, unknown>>;
