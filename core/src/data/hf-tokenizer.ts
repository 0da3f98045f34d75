/**
 * Hugging Face tokenizers: a Hub directory's `tokenizer.json` (the `tokenizers` library's format:
 * normalizer, pre-tokenizer, model — BPE, WordPiece, Unigram, WordLevel — post-processor, decoder,
 * added tokens), run by npm `@huggingface/tokenizers` (pure TypeScript, pinned in core/package.json;
 * the same code Transformers.js uses). Read from disk only: nothing is downloaded.
 *
 * `data.tokenizer` (and `--tokenizer` of generate/eval) names one by a path: the `tokenizer.json`
 * file, or a directory holding it (a `save_pretrained` directory, e.g. the one given to
 * `--init-from`). `tokenizer_config.json` next to it is read when present (special-token settings).
 *
 * Text is encoded without special tokens (no BOS/EOS added: training windows are cut from one
 * stream). Documents are separated by the end-of-sequence token: tokenizer_config.json's
 * `eos_token`, else the first added special token named `<|endoftext|>`, `</s>`, `<|im_end|>`,
 * `<eos>` or `<|end_of_text|>`; with none, documents are joined directly.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { describeValue } from "../config/json-bounds.ts";
import { basename, join, resolve } from "node:path";
import { Tokenizer as HfJsTokenizer } from "@huggingface/tokenizers";
import { DataError } from "./sources.ts";
import type { TokenArray, Tokenizer } from "./tokenizer.ts";

/** Largest tokenizer.json read (bytes); real ones are 2–20 MB. */
export const MAX_TOKENIZER_JSON_BYTES = 256 << 20;

/** End-of-sequence names tried when tokenizer_config.json does not name one. */
const EOS_CANDIDATES = ["<|endoftext|>", "</s>", "<|im_end|>", "<eos>", "<|end_of_text|>"];

/**
 * The tokenizer.json that `path` names: the file itself, or `<dir>/tokenizer.json`. Returns null when
 * neither exists (the caller words the error).
 */
export function tokenizerJsonPath(path: string): string | null {
  if (!existsSync(path)) return null;
  if (statSync(path).isDirectory()) {
    const f = join(path, "tokenizer.json");
    return existsSync(f) ? f : null;
  }
  return path;
}

function readJsonObject(file: string, what: string): Record<string, unknown> {
  const st = statSync(file);
  // before reading: reading a FIFO blocks until a writer comes
  if (!st.isFile()) throw new DataError(`${what} ${file}: not a regular file (${st.isDirectory() ? "a directory" : st.isFIFO() ? "a FIFO" : "a device or socket"})`);
  const size = st.size;
  if (size > MAX_TOKENIZER_JSON_BYTES) throw new DataError(`${what} ${file}: ${size} bytes is over the ${MAX_TOKENIZER_JSON_BYTES}-byte limit`);
  let v: unknown;
  try {
    v = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new DataError(`${what} ${file}: not valid JSON (${(e as Error).message})`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new DataError(`${what} ${file}: expected a JSON object`);
  return v as Record<string, unknown>;
}

/**
 * Number of ids of a parsed tokenizer.json: 1 + the largest id in `model.vocab` (an object
 * token → id for BPE/WordPiece/WordLevel, an array of [token, score] for Unigram) and
 * `added_tokens`.
 * @throws DataError naming `file` when there is no vocabulary, or an id is not a non-negative integer.
 */
export function tokenizerJsonVocabSize(json: Record<string, unknown>, file: string): number {
  const model = json.model as { vocab?: unknown } | undefined;
  let max = -1;
  const vocab = model?.vocab;
  // every id a non-negative integer: -5 reached the model as 65531 (a Uint16Array wraps it), 1.5 as 1
  const checkId = (id: unknown, where: string): number => {
    if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0) throw new DataError(`tokenizer ${file}: ${where} = ${describeValue(id)}: expected a non-negative integer id`);
    return id;
  };
  if (Array.isArray(vocab)) max = vocab.length - 1;
  else if (vocab && typeof vocab === "object") for (const [tok, id] of Object.entries(vocab as Record<string, unknown>)) max = Math.max(max, checkId(id, `model.vocab[${describeValue(tok)}]`));
  if (Array.isArray(json.added_tokens)) (json.added_tokens as { id?: unknown }[]).forEach((t, i) => (max = Math.max(max, checkId(t?.id, `added_tokens[${i}].id`))));
  if (max < 0) throw new DataError(`tokenizer ${file}: no vocabulary (expected model.vocab and/or added_tokens)`);
  return max + 1;
}

/**
 * Vocabulary size of the tokenizer.json at `path` (file or directory), read synchronously (config
 * resolution uses it to check `model.vocab_size`).
 * @throws DataError when there is no tokenizer.json there or it is not valid.
 */
export function hfTokenizerVocabSize(path: string): number {
  const file = tokenizerJsonPath(path);
  if (file === null) throw new DataError(`tokenizer: no tokenizer.json at ${resolve(path)}`);
  return tokenizerJsonVocabSize(readJsonObject(file, "tokenizer"), file);
}

/** A Hugging Face tokenizer.json as a {@link Tokenizer} (module comment). */
export class HfTokenizer implements Tokenizer {
  /** The tokenizer.json path as given. */
  readonly name: string;
  readonly vocabSize: number;
  readonly documentSeparator: readonly number[];
  private readonly tok: HfJsTokenizer;

  private constructor(name: string, tok: HfJsTokenizer, vocabSize: number, eos: number | null) {
    this.name = name;
    this.tok = tok;
    this.vocabSize = vocabSize;
    this.documentSeparator = eos === null ? [] : [eos];
  }

  /**
   * Load from `path` (tokenizer.json, or a directory holding it; tokenizer_config.json beside it
   * when present).
   * @throws DataError naming the file: missing, not JSON, no vocabulary, or rejected by the library.
   */
  static load(path: string): HfTokenizer {
    const file = tokenizerJsonPath(path);
    if (file === null) {
      const where = existsSync(path) ? `${resolve(path)} holds no tokenizer.json` : `${resolve(path)} does not exist`;
      throw new DataError(`data.tokenizer: ${where} (expected "byte", "gpt2", or a Hugging Face tokenizer.json / a directory holding one)`);
    }
    const json = readJsonObject(file, "tokenizer");
    const vocabSize = tokenizerJsonVocabSize(json, file);
    const cfgFile = join(file, "..", "tokenizer_config.json");
    const cfg = basename(file) === "tokenizer.json" && existsSync(cfgFile) ? readJsonObject(cfgFile, "tokenizer config") : {};
    let tok: HfJsTokenizer;
    try {
      tok = new HfJsTokenizer(json, cfg);
    } catch (e) {
      throw new DataError(`tokenizer ${file}: not usable by @huggingface/tokenizers: ${(e as Error).message}`);
    }
    const eosCfg = cfg.eos_token;
    const eosName = typeof eosCfg === "string" ? eosCfg : eosCfg && typeof eosCfg === "object" && typeof (eosCfg as { content?: unknown }).content === "string" ? (eosCfg as { content: string }).content : null;
    let eos: number | null = eosName === null ? null : (tok.token_to_id(eosName) ?? null);
    if (eos === null) {
      const added = Array.isArray(json.added_tokens) ? (json.added_tokens as { content?: unknown; id?: unknown; special?: unknown }[]) : [];
      for (const name of EOS_CANDIDATES) {
        const t = added.find((a) => a.content === name && a.special !== false && typeof a.id === "number");
        if (t) {
          eos = t.id as number;
          break;
        }
      }
    }
    return new HfTokenizer(path, tok, vocabSize, eos);
  }

  /** Ids of `text`, no special tokens added. Uint16Array when the vocabulary fits in 16 bits. */
  encode(text: string): TokenArray {
    const ids = this.tok.encode(text, { add_special_tokens: false }).ids;
    return this.vocabSize <= 65536 ? Uint16Array.from(ids) : Uint32Array.from(ids);
  }

  /** Text of `ids` (special tokens kept). @throws RangeError on an id outside the vocabulary. */
  decode(ids: ArrayLike<number>): string {
    const arr = Array.from(ids);
    for (let i = 0; i < arr.length; i++) {
      const v = arr[i]!;
      if (!(Number.isInteger(v) && v >= 0 && v < this.vocabSize)) throw new RangeError(`HfTokenizer.decode: id ${v} at ${i} is outside the vocabulary (0..${this.vocabSize - 1})`);
    }
    if (arr.length === 0) return ""; // the library refuses an empty list
    return this.tok.decode(arr, { skip_special_tokens: false });
  }
}
