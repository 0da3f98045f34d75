/**
 * The trained runs of a chat row, decoded: consecutive positions whose label is not −100, each
 * run's labels (which must equal the row's ids there: a label is the token itself, the shift to
 * next-token targets happens in the loss) decoded by `tok`. Shared by the chat tests.
 */
import { expect } from "bun:test";
import type { Tokenizer } from "../../../src/data/tokenizer.ts";

/** Decoded runs of `labels` ≠ −100 in order; checks each label equals its id. */
export function trainedText(tok: Pick<Tokenizer, "decode">, ids: ArrayLike<number>, labels: ArrayLike<number>): string[] {
  const runs: string[] = [];
  let cur: number[] = [];
  for (let t = 0; t <= labels.length; t++) {
    if (t < labels.length && labels[t] !== -100) {
      expect(labels[t]).toBe(ids[t]!);
      cur.push(labels[t]!);
    } else if (cur.length > 0) {
      runs.push(tok.decode(cur));
      cur = [];
    }
  }
  return runs;
}
