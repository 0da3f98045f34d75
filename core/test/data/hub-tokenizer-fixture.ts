/**
 * A small Hugging Face tokenizer.json for tests: byte-level BPE in the GPT-2 / Llama 3 / Qwen style
 * (ByteLevel pre-tokenizer and decoder, the 256 byte symbols of GPT-2's bytes_to_unicode as ids
 * 0..255 in byte order, a few merges, `<|endoftext|>` as an added special token), written as the
 * `tokenizers` library saves it.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** GPT-2's byte → printable character map (bytes_to_unicode in openai/gpt-2 encoder.py). */
export function bytesToUnicode(): string[] {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const out = new Array<string>(256);
  bs.forEach((b, i) => (out[b] = String.fromCodePoint(cs[i]!)));
  return out;
}

/** Merges of the fixture, in rank order (each adds one id after the 256 byte ids). */
export const FIXTURE_MERGES: readonly [string, string][] = [
  ["t", "h"],
  ["th", "e"],
  ["Ġ", "c"],
  ["a", "t"],
  ["Ġ", "w"],
  ["Ġw", "h"],
  ["a", "l"],
  ["Ġwh", "al"],
  ["Ġwhal", "e"],
];

/** The fixture's tokenizer.json object; ids: bytes 0..255, merges 256.., `<|endoftext|>` last. */
export function fixtureTokenizerJson(): { json: Record<string, unknown>; vocabSize: number; eos: number; ids: Record<string, number> } {
  const b2u = bytesToUnicode();
  const vocab: Record<string, number> = {};
  b2u.forEach((c, i) => (vocab[c] = i));
  for (const [a, b] of FIXTURE_MERGES) vocab[a + b] = Object.keys(vocab).length;
  const eos = Object.keys(vocab).length;
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  const json = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [{ id: eos, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: byteLevel,
    decoder: byteLevel,
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: FIXTURE_MERGES.map((m) => [...m]) },
  };
  return { json, vocabSize: eos + 1, eos, ids: vocab };
}

/** Write tokenizer.json (and a tokenizer_config.json naming the eos token) into `dir`. */
export function writeFixtureTokenizer(dir: string): { vocabSize: number; eos: number; ids: Record<string, number> } {
  mkdirSync(dir, { recursive: true });
  const { json, vocabSize, eos, ids } = fixtureTokenizerJson();
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(json));
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ eos_token: "<|endoftext|>", model_max_length: 64, tokenizer_class: "PreTrainedTokenizerFast" }));
  return { vocabSize, eos, ids };
}
