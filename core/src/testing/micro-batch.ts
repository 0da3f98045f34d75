/** Deterministic micro-batches for tests (no dataset needed). Exported as `@zeromoe/core/testing`. */
import type { TrainMicroBatch } from "../engine/engine.ts";

/**
 * Micro-batch `slot` of step `step`: `batch × seq` token ids (Int32Array, row-major) drawn from
 * [0, idRange) by a 32-bit LCG (Numerical Recipes constants) seeded from (step, slot) only, so a
 * rank of any world size builds the same micro-batch for the same global slot; labels = inputs.
 * @param idRange exclusive upper bound of the ids, by default the byte range min(vocab, 256)
 */
export function microBatch(step: number, slot: number, batch: number, seq: number, vocab: number, idRange: number = Math.min(vocab, 256)): TrainMicroBatch {
  const ids = new Int32Array(batch * seq);
  let x = (step * 7919 + slot * 104729 + 12345) >>> 0;
  for (let i = 0; i < ids.length; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    ids[i] = x % idRange;
  }
  return { inputIds: ids, labels: ids, batch, seq };
}
