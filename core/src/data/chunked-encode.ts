/**
 * Encoding a long text in bounded pieces, with the ids of encoding it whole.
 *
 * Why: `@huggingface/tokenizers` (0.2.0) runs its model on each pre-token and appends the result
 * with `push(...ids)`; a pre-tokenizer that does not split the text (Metaspace: that port ignores
 * its `split` option) hands a Unigram model the whole document, and past ~650K ids the spread
 * exceeds the engine's argument limit ("RangeError: Maximum call stack size exceeded" on Moby
 * Dick's 1.19M characters, with 1–2 GB of lattice). Transformers' Rust tokenizers never see such a
 * piece: their pre-tokenizers split at whitespace first, and the model runs word by word.
 *
 * How: a text longer than {@link ENCODE_PIECE_CHARS} is cut into pieces of at most that many
 * characters, each encoded by itself, the ids concatenated. A cut is made only at a candidate
 * that cannot change the ids:
 *
 * - candidates are single ASCII spaces between two non-whitespace characters (searched backwards
 *   from the piece's end, in its second half). Every pre-tokenizer in use starts a pre-token there
 *   and none spans it: GPT-2/Llama-3/Qwen byte-level regexes attach the space to the next word
 *   (` ?\p{L}+`), Whitespace/WhitespaceSplit/BERT drop it, Metaspace turns it into the `▁` that
 *   starts the next SentencePiece piece (and a SentencePiece vocabulary, trained with
 *   split_by_whitespace, holds `▁` only at the start of a piece, so the Unigram lattice has no node
 *   across it and Viterbi's best path decomposes there). Per-character normalisers (NFC/NFKC,
 *   Lowercase, Replace, Precompiled) do not act across an ASCII space, which has no compositions.
 * - each candidate is then checked on the text around it: the ids of the {@link CHECK_CHARS}
 *   characters before and after it, encoded together, must equal those of the two sides encoded
 *   apart. This catches what acts at a piece's start or end instead of per pre-token: a Prepend
 *   normaliser (Llama-2's `▁` before the text), Strip, prefix-space options, an added token or an
 *   lstrip/rstrip rule around the cut. When the two sides differ only by that start effect, the
 *   cut is retried with the space dropped from the right-hand piece (the normaliser puts back the
 *   `▁` it stood for: Llama-2), and kept when that is equal.
 * - up to {@link MAX_CANDIDATES} candidates are tried per cut; when none is equal (a tokenizer
 *   whose normaliser or pre-tokenizer acts across whole texts) the piece is cut at the first
 *   candidate (or, with no space at all, at a code-point boundary) and the cut is counted as
 *   inexact: its ids may differ from encoding whole within a few tokens of it.
 *
 * Texts of at most {@link ENCODE_PIECE_CHARS} characters are encoded whole, as before. A residual
 * difference: Viterbi adds scores along the path, and in a whole text the sum before a cut is
 * large, so two continuations within one rounding step of each other could compare differently;
 * per piece, the comparison is the one the Rust tokenizers make word by word.
 */

/** Longest text (UTF-16 code units) given to the library in one call: at most ~4 ids per
 * character (byte fallback) keeps a piece's ids far below the ~650K where the spread fails. */
export const ENCODE_PIECE_CHARS = 16384;

/** Characters on each side of a candidate cut that the check encodes. */
export const CHECK_CHARS = 256;

/** Candidate cuts tried per piece before one is taken unchecked. */
export const MAX_CANDIDATES = 8;

/** Result of {@link encodeInPieces}. */
export interface PiecewiseIds {
  ids: number[][];
  /** Number of ids in all pieces. */
  length: number;
  /** Cuts made. */
  cuts: number;
  /** Cuts where no checked candidate gave the ids of encoding whole (module comment). */
  inexactCuts: number;
}

const isSpace = (c: number): boolean => c === 32 || (c >= 9 && c <= 13) || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff || c === 0x85;

function sameIds(a: readonly number[], b: readonly number[], c: readonly number[]): boolean {
  if (a.length !== b.length + c.length) return false;
  for (let i = 0; i < b.length; i++) if (a[i] !== b[i]) return false;
  for (let i = 0; i < c.length; i++) if (a[b.length + i] !== c[i]) return false;
  return true;
}

/** Where the piece starting at `start` ends (exclusive), where the next one starts (`end`, or
 * `end + 1` with the space dropped), and whether the cut was checked equal. */
function findCut(text: string, start: number, encode: (s: string) => number[]): { end: number; next: number; exact: boolean } {
  const limit = start + ENCODE_PIECE_CHARS;
  let first = -1;
  let tried = 0;
  for (let p = limit - 1; p > start + (ENCODE_PIECE_CHARS >> 1) && tried < MAX_CANDIDATES; p--) {
    if (text.charCodeAt(p) !== 32 || isSpace(text.charCodeAt(p - 1)) || isSpace(text.charCodeAt(p + 1))) continue;
    if (first < 0) first = p;
    tried++;
    const left = text.slice(Math.max(start, p - CHECK_CHARS), p);
    const right = text.slice(p, p + CHECK_CHARS);
    const whole = encode(left + right);
    const l = encode(left);
    if (sameIds(whole, l, encode(right))) return { end: p, next: p, exact: true };
    if (sameIds(whole, l, encode(right.slice(1)))) return { end: p, next: p + 1, exact: true };
  }
  if (first >= 0) return { end: first, next: first, exact: false };
  // no space in the second half: cut at a code-point boundary (never between a surrogate pair)
  let p = limit;
  const c = text.charCodeAt(p);
  if (c >= 0xdc00 && c <= 0xdfff) p--;
  return { end: p, next: p, exact: false };
}

/**
 * Ids of `text` as `encode` gives them, computed piece by piece (module comment).
 * @param encode the tokenizer's encoder of one piece (no special tokens added).
 * @returns the pieces' ids in order, their total length, and the cuts made / taken unchecked.
 */
export function encodeInPieces(text: string, encode: (s: string) => number[]): PiecewiseIds {
  const ids: number[][] = [];
  let length = 0;
  let cuts = 0;
  let inexactCuts = 0;
  let start = 0;
  while (text.length - start > ENCODE_PIECE_CHARS) {
    const cut = findCut(text, start, encode);
    const piece = encode(text.slice(start, cut.end));
    ids.push(piece);
    length += piece.length;
    cuts++;
    if (!cut.exact) inexactCuts++;
    start = cut.next;
  }
  const last = encode(start === 0 ? text : text.slice(start));
  ids.push(last);
  length += last.length;
  return { ids, length, cuts, inexactCuts };
}
