/**
 * Autoregressive sampling from a causal LM, for demos and evaluation (no KV cache: each new token
 * re-runs the forward over the window of the last `max_position_embeddings` tokens, under noGrad).
 * Greedy decoding takes the arg-max (ties to the lower id); with `temperature > 0` a token is drawn
 * from softmax(logits / temperature), optionally restricted to the `topK` most likely ids (Fan et
 * al. 2018), using the Philox stream keyed by `seed`, so results are reproducible.
 */
import { noGrad, streamKey, uniformFill } from "../tensor/index.ts";
import type { CausalDecoder } from "./llama.ts";

/** Options of {@link generate}. */
export interface GenerateOptions {
  /** Number of tokens to append. */
  maxNewTokens: number;
  /** 0 (default) = greedy; otherwise the softmax temperature. */
  temperature?: number;
  /** Sample only among the k most likely tokens (0 or absent = all). */
  topK?: number;
  /** Seed of the sampling stream. */
  seed?: number;
  /** Stop after emitting this token id. */
  eosTokenId?: number;
}

/** Pick the next token from one row of logits (see the module comment). */
export function pickToken(logits: ArrayLike<number>, temperature: number, topK: number, u: number): number {
  const V = logits.length;
  if (temperature <= 0) {
    let best = 0;
    for (let i = 1; i < V; i++) if (logits[i]! > logits[best]!) best = i;
    return best;
  }
  let ids = Array.from({ length: V }, (_, i) => i);
  if (topK > 0 && topK < V) ids = ids.sort((a, b) => logits[b]! - logits[a]! || a - b).slice(0, topK);
  let max = -Infinity;
  for (const i of ids) max = Math.max(max, logits[i]! / temperature);
  const w = ids.map((i) => Math.exp(logits[i]! / temperature - max));
  const total = w.reduce((s, x) => s + x, 0);
  let acc = 0;
  for (let j = 0; j < ids.length; j++) {
    acc += w[j]! / total;
    if (u < acc) return ids[j]!;
  }
  return ids[ids.length - 1]!;
}

/**
 * Extend `prompt` (≥ 1 token ids) by up to `maxNewTokens` tokens; returns prompt + new tokens.
 * @throws on an empty prompt or ids outside the vocabulary (from the model's forward).
 */
export async function generate(model: CausalDecoder, prompt: ArrayLike<number>, opts: GenerateOptions): Promise<Int32Array> {
  if (prompt.length === 0) throw new Error("generate: the prompt needs at least one token");
  const window = model.config.max_position_embeddings;
  const V = model.config.vocab_size;
  const temperature = opts.temperature ?? 0;
  const topK = opts.topK ?? 0;
  const key = streamKey(opts.seed ?? 0, "generate");
  const seq = Array.from(prompt);
  const u = new Float64Array(1);
  for (let step = 0; step < opts.maxNewTokens; step++) {
    const ctx = seq.slice(-window);
    const row = await noGrad(async () => {
      const out = await model.forward({ inputIds: ctx, batch: 1, seq: ctx.length });
      const last = await model.be.read({ buf: out.logits.view.buf, off: out.logits.view.off + (ctx.length - 1) * V }, V);
      out.logits.dispose();
      out.auxLoss?.dispose();
      return last;
    });
    uniformFill(u, key, step);
    const next = pickToken(row as ArrayLike<number>, temperature, topK, u[0]!);
    seq.push(next);
    if (opts.eosTokenId !== undefined && next === opts.eosTokenId) break;
  }
  return Int32Array.from(seq);
}
