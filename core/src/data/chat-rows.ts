/**
 * Tokenized chat examples and their rows (docs/fine-tuning.md "Masking", "Packing"): a rendered
 * conversation is encoded whole and its pieces located in the ids ({@link tokenizePieces}), labels
 * the ids on trained pieces and −100 elsewhere (the model shifts labels by one: labels[t] is the target of
 * position t − 1, models/llama.ts shiftLabels). Rows are `seq_len` tokens:
 * - padding: one example per row, the rest of the row pad tokens with label −100 (causal
 *   attention: a pad token after the example changes nothing before it);
 * - packing: examples one after another in a row while they fit, each its own segment (per-token
 *   segment ids: RoPE positions restart and attention stays inside the example,
 *   tensor/ops/sequence-segments.ts); the first label of every segment is −100, so no example
 *   is scored on predicting the next example's first token, and each example computes exactly
 *   what it would alone. The row's unused tail is one more segment of pad tokens, labels −100.
 * An example longer than `seq_len` is cut to its first `seq_len` tokens (counted in
 * {@link ChatRows.truncated}).
 */
import type { ChatPiece } from "./chat-masking.ts";
import type { Tokenizer } from "./tokenizer.ts";

/** One tokenized example: ids and labels of equal length. */
export interface ChatExample {
  ids: Int32Array;
  labels: Int32Array;
}

/** Rows of a chat dataset: [rows, seqLen] row-major. */
export interface ChatRows {
  ids: Int32Array;
  labels: Int32Array;
  /** Per-token segment ids (packing); null with padding. */
  segmentIds: Int32Array | null;
  rows: number;
  seqLen: number;
  /** Examples placed. */
  examples: number;
  /** Tokens of each placed example (after the cut to seq_len), in order. */
  exampleLengths: Int32Array;
  /** Examples cut to seq_len. */
  truncated: number;
  /** Labels the loss scores (labels[t] ≠ −100 for t ≥ 1 of each row). */
  scored: number;
}

function commonPrefix(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * Ids and labels of one conversation's pieces: the whole render is encoded once (so the ids are
 * exactly the tokenizer's for the text, as Transformers' `apply_chat_template(tokenize=True)` gives
 * them — encoding each piece on its own would, with a Metaspace tokenizer such as Llama-2's, start
 * every piece with a fresh "▁"), and each piece boundary is placed at the number of leading ids the
 * encoding of the text before it shares with the whole encoding (the prefix-tokenization of
 * TRL and LLaMA-Factory); a token that straddles a boundary goes to the later piece.
 */
export function tokenizePieces(pieces: readonly ChatPiece[], tok: Tokenizer): ChatExample {
  const full = pieces.map((p) => p.text).join("");
  const all = tok.encode(full);
  const ids = Int32Array.from(all);
  const labels = new Int32Array(ids.length).fill(-100);
  let chars = 0;
  let start = 0;
  pieces.forEach((p, i) => {
    chars += p.text.length;
    const end = i === pieces.length - 1 ? ids.length : Math.max(start, commonPrefix(tok.encode(full.slice(0, chars)), all));
    if (p.train) labels.set(ids.subarray(start, end), start);
    start = end;
  });
  return { ids, labels };
}

/**
 * Lays `examples` into rows of `seqLen` tokens, packed or padded (module comment), in order.
 * @param padId id of the pad token (its labels are −100 whatever it is)
 */
export function chatRows(examples: readonly ChatExample[], seqLen: number, packing: boolean, padId: number): ChatRows {
  const cut = examples.map((e) => (e.ids.length > seqLen ? { ids: e.ids.subarray(0, seqLen), labels: e.labels.subarray(0, seqLen) } : e)).filter((e) => e.ids.length > 0);
  const truncated = examples.filter((e) => e.ids.length > seqLen).length;
  // row assignment: start offsets of each example
  const place: { row: number; at: number }[] = [];
  let rows = 0;
  let fill = seqLen;
  for (const e of cut) {
    if (!packing || fill + e.ids.length > seqLen) {
      rows++;
      fill = 0;
    }
    place.push({ row: rows - 1, at: fill });
    fill += e.ids.length;
  }
  const ids = new Int32Array(rows * seqLen).fill(padId);
  const labels = new Int32Array(rows * seqLen).fill(-100);
  const seg = packing ? new Int32Array(rows * seqLen) : null;
  const nextSeg = new Int32Array(rows);
  const used = new Int32Array(rows);
  cut.forEach((e, k) => {
    const { row, at } = place[k]!;
    const o = row * seqLen + at;
    ids.set(e.ids, o);
    labels.set(e.labels, o);
    if (seg) {
      labels[o] = -100;
      seg.fill(nextSeg[row]!++, o, o + e.ids.length);
    }
    used[row] = at + e.ids.length;
  });
  if (seg) for (let r = 0; r < rows; r++) seg.fill(nextSeg[r]!, r * seqLen + used[r]!, (r + 1) * seqLen);
  let scored = 0;
  for (let r = 0; r < rows; r++) for (let t = 1; t < seqLen; t++) if (labels[r * seqLen + t] !== -100) scored++;
  return { ids, labels, segmentIds: seg, rows, seqLen, examples: cut.length, exampleLengths: Int32Array.from(cut, (e) => e.ids.length), truncated, scored };
}
