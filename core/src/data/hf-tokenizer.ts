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
 *
 * The file is untrusted input: its structure is checked before the library sees it
 * (tokenizer-json-check.ts), and every regex it carries runs on the linear-time engine of
 * linear-regex.ts instead of the JavaScript engine (the library's compiled patterns are replaced
 * after construction, see {@link installLinearPatterns}). Each encode call's replacements are
 * bounded by {@link withReplaceBudget}; whatever the library still throws (a stack overflow on a
 * very long input, say) and any id outside the vocabulary become a DataError naming the file.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { describeValue } from "../config/json-bounds.ts";
import { pathForMessage, quoteUntrusted, QUOTE_MESSAGE_CHARS } from "../config/quote-untrusted.ts";
import { basename, join, resolve } from "node:path";
import { Tokenizer as HfJsTokenizer } from "@huggingface/tokenizers";
import { LinearRegExp, literalPattern, MAX_REPLACE_GROWTH, RegexWorkLimitError, withReplaceBudget } from "./linear-regex.ts";
import { encodeInPieces } from "./chunked-encode.ts";
import { DataError } from "./sources.ts";
import { checkTokenizerConfig, checkTokenizerJson, parseTokenizerJsonText } from "./tokenizer-json-check.ts";
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
  if (!st.isFile()) throw new DataError(`${what} ${pathForMessage(file)}: not a regular file (${st.isDirectory() ? "a directory" : st.isFIFO() ? "a FIFO" : "a device or socket"})`);
  const size = st.size;
  if (size > MAX_TOKENIZER_JSON_BYTES) throw new DataError(`${what} ${pathForMessage(file)}: ${size} bytes is over the ${MAX_TOKENIZER_JSON_BYTES}-byte limit`);
  return parseTokenizerJsonText(readFileSync(file, "utf8"), file);
}

type Obj = Record<string, unknown>;
/** What the library keeps of a component: its config and, for Replace/Split, the compiled pattern. */
interface LibNode {
  config?: Obj;
  pattern?: unknown;
  normalizers?: (LibNode | null)[];
  tokenizers?: (LibNode | null)[];
  decoders?: (LibNode | null)[];
}
/** The library's Tokenizer internals that {@link installLinearPatterns} touches (version 0.2.0). */
interface LibTokenizer {
  normalizer: (LibNode & ((s: string) => string)) | null;
  pre_tokenizer: LibNode | null;
  decoder: LibNode | null;
  added_tokens: { content: string; normalized: boolean }[];
  added_tokens_map: Map<string, unknown>;
  splitter_normalized: { constructor: new (words: string[]) => unknown };
}

/** The normalizer config with every pattern replaced by one that matches nothing the text has. */
const INERT_PATTERN = { String: "\uffff\ufffe\uffff" };
function inertNormalizer(v: unknown): unknown {
  if (v === null || typeof v !== "object") return v;
  const o = v as Obj;
  if (o.type === "Sequence" && Array.isArray(o.normalizers)) return { ...o, normalizers: o.normalizers.map(inertNormalizer) };
  if (o.pattern !== undefined) return { ...o, pattern: INERT_PATTERN };
  return o;
}
function hasPattern(v: unknown): boolean {
  if (v === null || typeof v !== "object") return false;
  const o = v as Obj;
  return o.pattern !== undefined || (Array.isArray(o.normalizers) && o.normalizers.some(hasPattern));
}

/**
 * Replace the library's compiled JavaScript patterns with {@link LinearRegExp}s built from the
 * checked config (same meaning as the library's `create_pattern`: a `String` pattern is a literal,
 * captured in a Split whose `invert` is false). `json` is the component's original config, `node`
 * what the library built from it. Returns how many patterns were replaced.
 */
function installLinearPatterns(json: unknown, node: LibNode | null, listKey: "normalizers" | "pretokenizers" | "decoders", libKey: "normalizers" | "tokenizers" | "decoders"): number {
  if (json === null || typeof json !== "object" || node === null) return 0;
  const o = json as Obj;
  let n = 0;
  if (o.type === "Sequence") {
    const items = o[listKey] as unknown[];
    const nodes = node[libKey];
    if (!Array.isArray(items) || !Array.isArray(nodes) || nodes.length !== items.length) throw new Error("installLinearPatterns: the tokenizer library's Sequence layout is not the expected one");
    items.forEach((x, i) => (n += installLinearPatterns(x, nodes[i]!, listKey, libKey)));
    return n;
  }
  const p = o.pattern as { Regex?: string; String?: string } | undefined;
  if (p === undefined) return 0;
  if (!(node.pattern instanceof RegExp)) throw new Error(`installLinearPatterns: the tokenizer library holds no compiled pattern for a ${String(o.type)}`);
  const invert = o.type === "Split" ? o.invert !== false : true;
  node.pattern = p.Regex !== undefined ? new LinearRegExp(p.Regex) : new LinearRegExp(invert ? literalPattern(p.String!) : `(${literalPattern(p.String!)})`);
  return n + 1;
}

/** Number of Regex/String patterns in a checked component tree. */
function countPatterns(v: unknown): number {
  if (v === null || typeof v !== "object") return 0;
  const o = v as Obj;
  let n = o.pattern !== undefined ? 1 : 0;
  for (const k of ["normalizers", "pretokenizers", "decoders"]) if (Array.isArray(o[k])) for (const x of o[k] as unknown[]) n += countPatterns(x);
  return n;
}

/**
 * The library's tokenizer for a checked `json`, running no JavaScript regex from the file: the
 * normalizer's patterns are made inert for construction (which normalizes the added tokens), then
 * every pattern is swapped for a linear-time one and the added tokens are normalized again.
 */
function buildLibraryTokenizer(json: Obj, cfg: Obj): HfJsTokenizer {
  const inert = hasPattern(json.normalizer);
  const tok = new HfJsTokenizer(inert ? { ...json, normalizer: inertNormalizer(json.normalizer) } : json, cfg);
  const lib = tok as unknown as LibTokenizer;
  const swapped =
    installLinearPatterns(json.normalizer, lib.normalizer, "normalizers", "normalizers") +
    installLinearPatterns(json.pre_tokenizer, lib.pre_tokenizer, "pretokenizers", "tokenizers") +
    installLinearPatterns(json.decoder, lib.decoder, "decoders", "decoders");
  const expected = countPatterns(json.normalizer) + countPatterns(json.pre_tokenizer) + countPatterns(json.decoder);
  if (swapped !== expected) throw new Error(`buildLibraryTokenizer: replaced ${swapped} of ${expected} patterns`);
  if (inert && lib.normalizer !== null) {
    // the library's constructor, again, with the real normalizer (bounded: linear patterns)
    const map = new Map<string, unknown>();
    const normalized: string[] = [];
    for (const t of lib.added_tokens) {
      map.set(t.content, t);
      if (t.normalized) {
        const nc = withReplaceBudget(MAX_REPLACE_GROWTH * t.content.length + 4096, () => lib.normalizer!(t.content));
        normalized.push(nc);
        map.set(nc, t);
      }
    }
    lib.added_tokens_map = map;
    lib.splitter_normalized = new lib.splitter_normalized.constructor(normalized) as LibTokenizer["splitter_normalized"];
  }
  return tok;
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
    if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0) throw new DataError(`tokenizer ${pathForMessage(file)}: ${where} = ${describeValue(id)}: expected a non-negative integer id`);
    return id;
  };
  if (Array.isArray(vocab)) max = vocab.length - 1;
  else if (vocab && typeof vocab === "object") for (const [tok, id] of Object.entries(vocab as Record<string, unknown>)) max = Math.max(max, checkId(id, `model.vocab[${describeValue(tok)}]`));
  if (Array.isArray(json.added_tokens)) (json.added_tokens as { id?: unknown }[]).forEach((t, i) => (max = Math.max(max, checkId(t?.id, `added_tokens[${i}].id`))));
  if (max < 0) throw new DataError(`tokenizer ${pathForMessage(file)}: no vocabulary (expected model.vocab and/or added_tokens)`);
  return max + 1;
}

/**
 * Vocabulary size of the tokenizer.json at `path` (file or directory), read synchronously (config
 * resolution uses it to check `model.vocab_size`).
 * @throws DataError when there is no tokenizer.json there or it is not valid.
 */
export function hfTokenizerVocabSize(path: string): number {
  const file = tokenizerJsonPath(path);
  if (file === null) throw new DataError(`tokenizer: no tokenizer.json at ${pathForMessage(resolve(path))}`);
  return tokenizerJsonVocabSize(readJsonObject(file, "tokenizer"), file);
}

/** A library failure as one bounded line (a stack overflow said as such). */
function libraryFailure(e: unknown): string {
  if (e instanceof RangeError && /call stack/i.test(e.message)) return "the tokenizer library ran out of stack (RangeError: Maximum call stack size exceeded)";
  if (e instanceof RegexWorkLimitError) return e.message;
  const msg = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  return quoteUntrusted(msg, QUOTE_MESSAGE_CHARS);
}

/** A Hugging Face tokenizer.json as a {@link Tokenizer} (module comment). */
export class HfTokenizer implements Tokenizer {
  /** The tokenizer.json path as given. */
  readonly name: string;
  readonly vocabSize: number;
  readonly documentSeparator: readonly number[];
  /** The tokenizer.json file read. */
  private readonly file: string;
  private readonly tok: HfJsTokenizer;
  /** A cut not checked equal was reported (see {@link encode}). */
  private warnedInexact = false;

  private constructor(name: string, file: string, tok: HfJsTokenizer, vocabSize: number, eos: number | null) {
    this.name = name;
    this.file = file;
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
      const where = existsSync(path) ? `${pathForMessage(resolve(path))} holds no tokenizer.json` : `${pathForMessage(resolve(path))} does not exist`;
      throw new DataError(`data.tokenizer: ${where} (expected "byte", "gpt2", or a Hugging Face tokenizer.json / a directory holding one)`);
    }
    const json = readJsonObject(file, "tokenizer");
    checkTokenizerJson(json, file);
    const vocabSize = tokenizerJsonVocabSize(json, file);
    const cfgFile = join(file, "..", "tokenizer_config.json");
    const cfg = basename(file) === "tokenizer.json" && existsSync(cfgFile) ? readJsonObject(cfgFile, "tokenizer config") : {};
    checkTokenizerConfig(cfg, cfgFile);
    let tok: HfJsTokenizer;
    try {
      tok = buildLibraryTokenizer(json, cfg);
    } catch (e) {
      if (e instanceof DataError) throw e;
      throw new DataError(`tokenizer ${pathForMessage(file)}: not usable by @huggingface/tokenizers: ${libraryFailure(e)}`);
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
    return new HfTokenizer(path, file, tok, vocabSize, eos);
  }

  /**
   * Ids of `text`, no special tokens added. Uint16Array when the vocabulary fits in 16 bits. A
   * text of any length: one over ENCODE_PIECE_CHARS characters is encoded in pieces, cut where the
   * ids equal those of encoding it whole (chunked-encode.ts); a cut that could not be checked
   * equal (a normaliser acting on whole texts) is said once per tokenizer in a `warning:` line
   * on stderr.
   * @throws DataError naming the file when the library fails on `text` (a stack overflow, a
   *   replacement past its bound) or yields an id outside 0..vocabSize-1 (or none: a piece that
   *   is not in the vocabulary, with no unk token).
   */
  encode(text: string): TokenArray {
    const r = encodeInPieces(text, (s) => this.encodePiece(s));
    if (r.inexactCuts > 0 && !this.warnedInexact) {
      this.warnedInexact = true;
      console.error(`warning: tokenizer ${pathForMessage(this.file)}: a ${text.length}-character text was encoded in ${r.cuts + 1} pieces; at ${r.inexactCuts} of the ${r.cuts} cuts its normaliser or pre-tokenizer acts across the cut, so the ids there may differ from encoding the text whole`);
    }
    const out = this.vocabSize <= 65536 ? new Uint16Array(r.length) : new Uint32Array(r.length);
    let o = 0;
    for (const piece of r.ids) {
      out.set(piece, o);
      o += piece.length;
    }
    return out;
  }

  /** The library's ids of one piece of text (at most ENCODE_PIECE_CHARS characters), checked. */
  private encodePiece(text: string): number[] {
    let enc: { ids: unknown[]; tokens: unknown[] };
    try {
      enc = withReplaceBudget(MAX_REPLACE_GROWTH * text.length + 4096, () => this.tok.encode(text, { add_special_tokens: false }));
    } catch (e) {
      throw new DataError(`tokenizer ${pathForMessage(this.file)}: encoding ${text.length} characters failed: ${libraryFailure(e)}`);
    }
    const ids = enc.ids;
    for (let i = 0; i < ids.length; i++) {
      const v = ids[i];
      if (typeof v === "number" && Number.isInteger(v) && v >= 0 && v < this.vocabSize) continue;
      const what = v === undefined ? "no id (it is not in the vocabulary and the model has no unk token)" : `id ${describeValue(v)}, outside the vocabulary (0..${this.vocabSize - 1})`;
      throw new DataError(`tokenizer ${pathForMessage(this.file)}: piece ${i} of the text, ${describeValue(enc.tokens[i])}, got ${what}`);
    }
    return ids as number[];
  }

  /** Text of `ids` (special tokens kept). @throws RangeError on an id outside the vocabulary. */
  decode(ids: ArrayLike<number>): string {
    const arr = Array.from(ids);
    for (let i = 0; i < arr.length; i++) {
      const v = arr[i]!;
      if (!(Number.isInteger(v) && v >= 0 && v < this.vocabSize)) throw new RangeError(`HfTokenizer.decode: id ${v} at ${i} is outside the vocabulary (0..${this.vocabSize - 1})`);
    }
    if (arr.length === 0) return ""; // the library refuses an empty list
    try {
      return this.tok.decode(arr, { skip_special_tokens: false });
    } catch (e) {
      throw new DataError(`tokenizer ${pathForMessage(this.file)}: decoding ${arr.length} ids failed: ${libraryFailure(e)}`);
    }
  }
}
