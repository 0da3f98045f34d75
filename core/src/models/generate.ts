/**
 * Autoregressive sampling from a causal LM (batch 1), with a key/value cache (kv-cache.ts): the
 * prompt runs once, then each new token is one forward over that token attending to the cached
 * positions — the cost per token does not grow with a re-run of the whole context.
 *
 * Sampling follows Hugging Face's `generate` order of logits processors: greedy (arg-max, ties to
 * the lower id) when `temperature` is 0; otherwise logits / temperature, then top-k (keep the k
 * largest; Fan et al. 2018), then top-p (keep the smallest set of most likely ids whose probability
 * sums to ≥ p; Holtzman et al. 2020 "nucleus sampling"), and a draw from the renormalised softmax
 * with the Philox stream keyed by `seed` (one uniform per step), so results are reproducible.
 *
 * The cache holds min(max_position_embeddings, prompt + maxNewTokens) positions (allocated once).
 * Context longer than `max_position_embeddings`: with the cache, when it is full the last
 * ⌈capacity/2⌉ tokens are run again as a new prompt (positions restart at 0), so the cost stays
 * linear per token on average; without the cache (`cache: false`, or a model whose attention
 * ignores it) each step runs the forward over the last `max_position_embeddings` tokens.
 */
import { noGrad, streamKey, uniformFill } from "../tensor/index.ts";
import { KVCache } from "./kv-cache.ts";
import type { CausalDecoder } from "./llama.ts";

/** Options of {@link generate}. */
export interface GenerateOptions {
  /** Number of tokens to append (≥ 0). */
  maxNewTokens: number;
  /** 0 (default) = greedy; otherwise the softmax temperature (> 0). */
  temperature?: number;
  /** Sample only among the k most likely tokens (0 or absent = all). */
  topK?: number;
  /** Nucleus sampling: keep the most likely tokens up to cumulative probability p (0 < p ≤ 1;
   * 1 or absent = all). */
  topP?: number;
  /** Seed of the sampling stream. */
  seed?: number;
  /** Stop after emitting this token id. */
  eosTokenId?: number;
  /** Use a KV cache (default true). */
  cache?: boolean;
  /** Sample only ids below this (1..vocab_size; default vocab_size): the tokenizer's vocabulary
   * when the model's is padded larger (Llama-3, Qwen, Mixtral pad to multiples), so every id
   * drawn can be decoded. The logits of ids at or past it are left out of arg-max and softmax. */
  vocabLimit?: number;
  /** Called with each step's next-token logits (vocab floats) before sampling (tests, scoring). */
  onLogits?: (step: number, logits: Float32Array) => void;
}

/**
 * Pick the next token from one row of logits (see the module comment); `u` is a uniform in [0, 1).
 * @param topP 1 (default) disables nucleus filtering.
 */
export function pickToken(logits: ArrayLike<number>, temperature: number, topK: number, u: number, topP = 1): number {
  const V = logits.length;
  if (temperature <= 0) {
    let best = 0;
    for (let i = 1; i < V; i++) if (logits[i]! > logits[best]!) best = i;
    return best;
  }
  let ids = Array.from({ length: V }, (_, i) => i).sort((a, b) => logits[b]! - logits[a]! || a - b);
  if (topK > 0 && topK < V) ids = ids.slice(0, topK);
  const max = logits[ids[0]!]! / temperature;
  let w = ids.map((i) => Math.exp(logits[i]! / temperature - max));
  let total = w.reduce((s, x) => s + x, 0);
  if (topP < 1) {
    // smallest prefix (most likely first) with probability ≥ topP; always at least one token
    let acc = 0;
    let keep = 0;
    while (keep < ids.length) {
      acc += w[keep]! / total;
      keep++;
      if (acc >= topP) break;
    }
    ids = ids.slice(0, keep);
    w = w.slice(0, keep);
    total = w.reduce((s, x) => s + x, 0);
  }
  let acc = 0;
  for (let j = 0; j < ids.length; j++) {
    acc += w[j]! / total;
    if (u < acc) return ids[j]!;
  }
  return ids[ids.length - 1]!;
}

/** Check {@link GenerateOptions} against a vocabulary of `V` ids; throws naming the option. */
function checkOptions(opts: GenerateOptions, V: number): void {
  const lim = opts.vocabLimit ?? V;
  if (!Number.isInteger(lim) || lim < 1 || lim > V) throw new RangeError(`generate: vocabLimit must be an integer in [1, ${V}] (the model's vocab_size), got ${lim}`);
  if (!Number.isInteger(opts.maxNewTokens) || opts.maxNewTokens < 0) throw new RangeError(`generate: maxNewTokens must be a non-negative integer, got ${opts.maxNewTokens}`);
  const t = opts.temperature ?? 0;
  if (!(t >= 0) || !Number.isFinite(t)) throw new RangeError(`generate: temperature must be ≥ 0, got ${t}`);
  const k = opts.topK ?? 0;
  if (!Number.isInteger(k) || k < 0) throw new RangeError(`generate: topK must be a non-negative integer, got ${k}`);
  const p = opts.topP ?? 1;
  if (!(p > 0 && p <= 1)) throw new RangeError(`generate: topP must be in (0, 1], got ${p}`);
}

/**
 * Extend `prompt` (≥ 1 token ids) by up to `maxNewTokens` tokens; returns prompt + new tokens.
 * @throws RangeError on an empty prompt or a bad option; the model's forward throws on ids outside
 *   the vocabulary.
 */
export async function generate(model: CausalDecoder, prompt: ArrayLike<number>, opts: GenerateOptions): Promise<Int32Array> {
  if (prompt.length === 0) throw new RangeError("generate: the prompt needs at least one token");
  const window = model.config.max_position_embeddings;
  const V = model.config.vocab_size;
  checkOptions(opts, V);
  const vocabLimit = opts.vocabLimit ?? V;
  const temperature = opts.temperature ?? 0;
  const topK = opts.topK ?? 0;
  const topP = opts.topP ?? 1;
  const key = streamKey(opts.seed ?? 0, "generate");
  const seq = Array.from(prompt);
  const u = new Float64Array(1);
  // capacity: the positions this call can fill before a reset (prompt window + new tokens), at most
  // max_position_embeddings — a config's max_position_embeddings of 1e12 must not size the cache
  const capacity = Math.min(window, Math.min(seq.length, window) + opts.maxNewTokens);
  let cache: KVCache | null = opts.cache === false || opts.maxNewTokens === 0 ? null : new KVCache(model.be, model.config, capacity);
  /** Next-token logits after running `ids` (the whole context without a cache, else new positions). */
  const run = (ids: number[]): Promise<Float32Array> =>
    noGrad(async () => {
      const out = await model.forward({ inputIds: ids, batch: 1, seq: ids.length, lastLogitsOnly: true, ...(cache ? { cache } : {}) });
      const logits = out.logits!; // a forward without labels always returns its logits: here [1, 1, V]
      const last = await model.be.read(logits.view, V);
      logits.dispose();
      out.auxLoss?.dispose();
      return Float32Array.from(last as ArrayLike<number>);
    });
  try {
    let pending: number[] = seq.slice(-window);
    for (let step = 0; step < opts.maxNewTokens; step++) {
      let row: Float32Array;
      if (cache) {
        if (cache.length + pending.length > cache.capacity) {
          // full: start again from the last half of the context
          cache.reset();
          pending = seq.slice(-Math.ceil(cache.capacity / 2));
        }
        const before = cache.length;
        row = await run(pending);
        if (!cache.filledTo(before + pending.length)) {
          // this model's attention does not use the cache: the prompt's logits are still right
          // (it saw the whole prompt); continue without it
          cache.destroy();
          cache = null;
        }
      } else {
        row = await run(seq.slice(-window));
      }
      opts.onLogits?.(step, row);
      uniformFill(u, key, step);
      const next = pickToken(vocabLimit < V ? row.subarray(0, vocabLimit) : row, temperature, topK, u[0]!, topP);
      seq.push(next);
      pending = [next];
      if (opts.eosTokenId !== undefined && next === opts.eosTokenId) break;
    }
  } finally {
    cache?.destroy();
  }
  return Int32Array.from(seq);
}
