/**
 * Tokenizers: `byte` (UTF-8 bytes, vocabulary 256), `gpt2` (GPT-2's byte-level BPE, the
 * `r50k_base` encoding of npm `gpt-tokenizer`, which ships its merge tables: no download), or a
 * path to a Hugging Face tokenizer.json / a directory holding one (hf-tokenizer.ts).
 */
import { decode as gpt2Decode, encode as gpt2Encode } from "gpt-tokenizer/encoding/r50k_base";
import { HfTokenizer } from "./hf-tokenizer.ts";

/** Token ids of a corpus: Uint16Array when the vocabulary fits in 16 bits (both tokenizers here). */
export type TokenArray = Uint16Array | Uint32Array;

/** Text ↔ token ids. */
export interface Tokenizer {
  /** "byte", "gpt2", or the tokenizer.json path of a Hugging Face tokenizer. */
  readonly name: string;
  /** Number of distinct ids; every id is < vocabSize. */
  readonly vocabSize: number;
  /** Ids placed between documents when a dataset has several (jsonl lines, SOTU speeches). */
  readonly documentSeparator: readonly number[];
  encode(text: string): TokenArray;
  decode(ids: ArrayLike<number>): string;
}

/** UTF-8 bytes as tokens (vocab 256). Documents are separated by a blank line ("\n\n"). */
export class ByteTokenizer implements Tokenizer {
  readonly name = "byte" as const;
  readonly vocabSize = 256;
  readonly documentSeparator = [10, 10] as const;
  private readonly enc = new TextEncoder();
  private readonly dec = new TextDecoder("utf-8", { fatal: false });
  encode(text: string): Uint16Array {
    return Uint16Array.from(this.enc.encode(text));
  }
  /** Invalid UTF-8 (a cut multi-byte character) decodes to U+FFFD. Throws on ids ≥ 256. */
  decode(ids: ArrayLike<number>): string {
    const b = new Uint8Array(ids.length);
    for (let i = 0; i < ids.length; i++) {
      const v = ids[i];
      if (!(v >= 0 && v < 256 && Number.isInteger(v))) throw new RangeError(`ByteTokenizer.decode: id ${v} at ${i} is not a byte (0..255)`);
      b[i] = v;
    }
    return this.dec.decode(b);
  }
}

/** GPT-2 BPE (r50k_base, vocab 50257). Documents are separated by `<|endoftext|>` (50256). */
export class Gpt2Tokenizer implements Tokenizer {
  readonly name = "gpt2" as const;
  readonly vocabSize = 50257;
  /** `<|endoftext|>`. */
  static readonly EOT = 50256;
  readonly documentSeparator = [Gpt2Tokenizer.EOT] as const;
  /** Special-token text in the input is encoded as ordinary text, never as `<|endoftext|>`. */
  encode(text: string): Uint16Array {
    return Uint16Array.from(gpt2Encode(text, { disallowedSpecial: new Set() }));
  }
  decode(ids: ArrayLike<number>): string {
    return gpt2Decode(Array.from(ids));
  }
}

/**
 * The tokenizer named in `data.tokenizer`: "byte", "gpt2", or a path to a Hugging Face
 * tokenizer.json or a directory holding one.
 * @throws DataError (from {@link HfTokenizer.load}) naming the path when it holds no usable tokenizer.json.
 */
export function createTokenizer(name: string): Tokenizer {
  if (name === "byte") return new ByteTokenizer();
  if (name === "gpt2") return new Gpt2Tokenizer();
  return HfTokenizer.load(name);
}
