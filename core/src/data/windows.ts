/**
 * Train/validation split of a token stream and its cutting into training windows.
 * Window w of a stream covers tokens [w·S, w·S + S] (S + 1 tokens): inputs are the first S,
 * targets the last S (next-token prediction). Windows do not overlap; the stream's last partial
 * window is unused.
 */
import type { TokenArray } from "./tokenizer.ts";

/** The two parts of a corpus. */
export interface TokenSplit {
  train: TokenArray;
  validation: TokenArray;
}

/**
 * Splits off the last ⌊N · fraction⌋ tokens for validation (a contiguous tail, so no training
 * window overlaps a validation one). Views, no copy.
 */
export function splitTokens(tokens: TokenArray, validationFraction: number): TokenSplit {
  if (!(validationFraction >= 0 && validationFraction < 1)) throw new RangeError(`splitTokens: validation_fraction must be in [0, 1), got ${validationFraction}`);
  const nVal = Math.floor(tokens.length * validationFraction);
  const cut = tokens.length - nVal;
  return { train: tokens.subarray(0, cut), validation: tokens.subarray(cut) };
}

/** Number of full windows of `seqLen` (+1 target) tokens in a stream of `length` tokens. */
export function windowCount(length: number, seqLen: number): number {
  return length >= seqLen + 1 ? Math.floor((length - 1) / seqLen) : 0;
}

/**
 * Writes window `w` of `tokens` into row `row` of inputs/targets ([rows, seqLen] Int32Array).
 * Throws if the window is outside the stream.
 */
export function fillWindow(tokens: TokenArray, w: number, seqLen: number, inputs: Int32Array, targets: Int32Array, row: number): void {
  const start = w * seqLen;
  if (w < 0 || start + seqLen + 1 > tokens.length) throw new RangeError(`fillWindow: window ${w} (tokens ${start}..${start + seqLen}) is outside a stream of ${tokens.length} tokens`);
  const o = row * seqLen;
  for (let i = 0; i < seqLen; i++) {
    inputs[o + i] = tokens[start + i];
    targets[o + i] = tokens[start + i + 1];
  }
}
