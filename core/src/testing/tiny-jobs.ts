/**
 * Tiny job configs for tests: models small enough to train a step in milliseconds on the cpu
 * backend, with sizes chosen to exercise padding and uneven shards (see each function).
 * Exported as `@zeromoe/core/testing`.
 */

/** The tiny mixtral of the smoke tests (every unit's element count divisible by 2, 3 and 4). */
export function tinyModel(): Record<string, unknown> {
  return {
    model_type: "mixtral", vocab_size: 256, hidden_size: 24, intermediate_size: 20, num_hidden_layers: 2,
    num_attention_heads: 3, num_key_value_heads: 1, num_local_experts: 3, num_experts_per_tok: 2,
    max_position_embeddings: 32, router_aux_loss_coef: 0.02, output_router_logits: true,
  };
}

/**
 * A tiny mixtral with awkward sizes: hidden 25 (odd), head_dim 6 ≠ hidden/heads, vocab 257 (prime),
 * intermediate 7. Unit element counts: embed 6425, each layer 1325, each expert 525, head 6450;
 * Ψ = 18675 ({@link AWKWARD_NUMEL}). They are not multiples of 2, 3 or 4 (except the expert by 3),
 * so shards carry padding at world sizes 2, 3 and 4.
 */
export function awkwardModel(): Record<string, unknown> {
  return {
    model_type: "mixtral", vocab_size: 257, hidden_size: 25, head_dim: 6, intermediate_size: 7, num_hidden_layers: 2,
    num_attention_heads: 3, num_key_value_heads: 1, num_local_experts: 3, num_experts_per_tok: 2,
    max_position_embeddings: 32, router_aux_loss_coef: 0.02, output_router_logits: true,
  };
}

/**
 * A tiny dense llama with awkward sizes (vocab 256, hidden 12, intermediate 23 (prime), 1 layer,
 * 3 heads of dim 4): needs no built-in plugin at ZeRO stage 0, so a job around it trains with only
 * @zeromoe/core and @zeromoe/kernels installed (an out-of-tree plugin's tests).
 */
export function tinyLlamaModel(): Record<string, unknown> {
  return {
    model_type: "llama", vocab_size: 256, hidden_size: 12, intermediate_size: 23, num_hidden_layers: 1,
    num_attention_heads: 3, max_position_embeddings: 16,
  };
}

/** Element count of {@link awkwardModel} (sum over its units). */
export const AWKWARD_NUMEL = 18675;

/** Raw job JSON (before resolveJobConfig) of {@link tinyModel} on moby-dick with the byte
 * tokenizer, seq_len 7, micro-batch 2, AdamW lr 1e-2, cpu backend; `over` replaces top-level keys
 * (shallow). */
export function tinyJob(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model: tinyModel(),
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 7 },
    seed: 7,
    backend: "cpu",
    train_micro_batch_size_per_gpu: 2,
    optimizer: { type: "AdamW", params: { lr: 1e-2, weight_decay: 0.1 } },
    ...over,
  };
}
