/**
 * The one-layer Llama the CLI tests train, evaluate and load as a Hugging Face directory
 * (checkpoint/dir-lock.test.ts, checkpoint/hostile.test.ts, cli/hostile-inference.test.ts,
 * cli/valid-inputs.test.ts): small enough to run as real processes, with an intermediate size (37)
 * and two heads over one kv head so nothing lines up by accident.
 */

/** Its Hugging Face `config.json` (vocabulary of the byte tokenizer). */
export const TINY_LLAMA_HF = {
  model_type: "llama", vocab_size: 256, hidden_size: 24, intermediate_size: 37, num_hidden_layers: 1,
  num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 64,
};

/** A world-2 cpu job of it on moby-dick bytes (seed 5, AdamW 1e-3); add `steps` and `steps_per_print`. */
export const TINY_LLAMA_CLI_JOB = {
  model: TINY_LLAMA_HF,
  data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 11 },
  seed: 5,
  backend: "cpu",
  world_size: 2,
  eval_interval: 0,
  train_micro_batch_size_per_gpu: 1,
  gradient_accumulation_steps: 1,
  optimizer: { type: "AdamW", params: { lr: 1e-3 } },
};
