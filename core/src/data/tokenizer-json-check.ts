/**
 * Structure of an untrusted tokenizer.json, checked before any of it reaches `@huggingface/tokenizers`
 * (issue 32: 53 of 10,000 mutated files crashed inside the library with `tokens[i].replaceAll is not
 * a function`, `token.startsWith is not a function`, a stack overflow, or ids the model could not
 * hold). The library trusts its input; this module states what the format is and refuses anything
 * else with a {@link DataError} naming the file and the JSON path:
 *
 * - sizes first ({@link TOKENIZER_JSON_LIMITS}, scanned on the text before `JSON.parse`): nesting,
 *   string and key lengths, members per object/array;
 * - `model`: BPE, WordPiece, Unigram or WordLevel. Every token a string of at most
 *   {@link MAX_TOKEN_CHARS} characters; every id a non-negative integer below {@link MAX_TOKEN_ID},
 *   and unique (a vocabulary maps each id to one token: with two, decoding is ambiguous). Unigram
 *   pieces are `[string, finite score]`, `unk_id` one of their positions. BPE merges are all
 *   `"a b"` strings (exactly one space) or all `[a, b]` pairs, and `a`, `b` and the merged token are
 *   in the vocabulary (as the Rust library requires);
 * - `added_tokens`: objects with a non-empty string `content`, a unique id, boolean flags;
 * - `normalizer`, `pre_tokenizer`, `post_processor`, `decoder`: null or a known `type` whose
 *   fields have the types the library reads, nested (Sequence) at most {@link MAX_COMPONENT_DEPTH}
 *   deep; every regex compiles with the linear-time engine (linear-regex.ts), at most
 *   {@link MAX_PATTERNS} of them; inserted strings (Replace content, Prepend, Metaspace
 *   replacement) at most {@link MAX_INSERT_CHARS} characters.
 *
 * Unknown keys are ignored (newer files add fields); unknown component types are refused (the
 * library would throw on them anyway, with no path).
 */
import { describeValue, scanJsonBounds, type JsonLimits } from "../config/json-bounds.ts";
import { pathForMessage, quoteUntrusted, QUOTE_MESSAGE_CHARS } from "../config/quote-untrusted.ts";
import { LinearRegExp, UnsafeRegexError } from "./linear-regex.ts";
import { DataError } from "./sources.ts";

/** Size limits of a tokenizer.json text (real ones: depth ≤ 6, ≤ 300K vocabulary entries, a
 * Precompiled charsmap of ≤ 400 KB base64). */
export const TOKENIZER_JSON_LIMITS: Readonly<JsonLimits> = { maxDepth: 16, maxString: 1 << 20, maxKey: 4096, maxMembers: 1 << 21, maxText: 256 << 20 };
/** Longest token (UTF-16 units); real vocabularies' longest are a few hundred. */
export const MAX_TOKEN_CHARS = 4096;
/** Ids must be below this (2^24: 64× the largest Hub vocabulary). */
export const MAX_TOKEN_ID = 1 << 24;
/** Deepest Sequence-in-Sequence nesting of normalizers/pre-tokenizers/decoders/post-processors. */
export const MAX_COMPONENT_DEPTH = 4;
/** Most regex/string patterns in one tokenizer.json. */
export const MAX_PATTERNS = 64;
/** Longest string a component inserts into the text. */
export const MAX_INSERT_CHARS = 1024;

type Obj = Record<string, unknown>;

class Checker {
  patterns = 0;
  constructor(readonly file: string) {}

  fail(path: string, msg: string): never {
    throw new DataError(`tokenizer ${pathForMessage(this.file)}: ${path}: ${msg}`);
  }
  obj(v: unknown, path: string): Obj {
    if (v === null || typeof v !== "object" || Array.isArray(v)) this.fail(path, `${describeValue(v)}: expected an object`);
    return v as Obj;
  }
  arr(v: unknown, path: string): unknown[] {
    if (!Array.isArray(v)) this.fail(path, `${describeValue(v)}: expected an array`);
    return v;
  }
  str(v: unknown, path: string, max = MAX_TOKEN_CHARS): string {
    if (typeof v !== "string") this.fail(path, `${describeValue(v)}: expected a string`);
    if (v.length > max) this.fail(path, `a string of ${v.length} characters (at most ${max})`);
    return v;
  }
  optStr(o: Obj, key: string, path: string, max = MAX_INSERT_CHARS): void {
    if (o[key] !== undefined && o[key] !== null) this.str(o[key], `${path}.${key}`, max);
  }
  optBool(o: Obj, key: string, path: string): void {
    if (o[key] !== undefined && o[key] !== null && typeof o[key] !== "boolean") this.fail(`${path}.${key}`, `${describeValue(o[key])}: expected true or false`);
  }
  optInt(o: Obj, key: string, path: string, min: number, max: number): void {
    const v = o[key];
    if (v === undefined || v === null) return;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min || v > max) this.fail(`${path}.${key}`, `${describeValue(v)}: expected an integer in [${min}, ${max}]`);
  }
  optEnum(o: Obj, key: string, path: string, values: readonly string[]): void {
    const v = o[key];
    if (v === undefined || v === null) return;
    if (typeof v !== "string" || !values.some((x) => x.toLowerCase() === v.toLowerCase())) this.fail(`${path}.${key}`, `${describeValue(v)}: expected one of ${values.join(", ")}`);
  }
  id(v: unknown, path: string): number {
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0 || v >= MAX_TOKEN_ID) this.fail(path, `${describeValue(v)}: expected a non-negative integer id below ${MAX_TOKEN_ID}`);
    return v;
  }
  type(o: Obj, path: string): string {
    return this.str(o.type, `${path}.type`, 64);
  }

  /** A `{Regex: string}` or `{String: string}` pattern: compiled by the linear-time engine. */
  pattern(v: unknown, path: string): void {
    const p = this.obj(v, path);
    if (++this.patterns > MAX_PATTERNS) this.fail(path, `more than ${MAX_PATTERNS} patterns`);
    if (p.Regex !== undefined) {
      const src = this.str(p.Regex, `${path}.Regex`, 1 << 16);
      try {
        new LinearRegExp(src);
      } catch (e) {
        if (e instanceof UnsafeRegexError) this.fail(`${path}.Regex`, `${describeValue(src)} cannot be run in linear time: ${e.message}`);
        throw e;
      }
    } else if (p.String !== undefined) this.str(p.String, `${path}.String`);
    else this.fail(path, `${describeValue(v)}: expected {"Regex": string} or {"String": string}`);
  }

  list(v: unknown, path: string, depth: number, each: (x: unknown, p: string, d: number) => void): void {
    if (depth >= MAX_COMPONENT_DEPTH) this.fail(path, `Sequence nested deeper than ${MAX_COMPONENT_DEPTH} levels`);
    this.arr(v, path).forEach((x, i) => each(x, `${path}[${i}]`, depth + 1));
  }

  normalizer(v: unknown, path: string, depth: number): void {
    if (v === null) return;
    const o = this.obj(v, path);
    switch (this.type(o, path)) {
      case "BertNormalizer":
        for (const k of ["clean_text", "handle_chinese_chars", "strip_accents", "lowercase"]) this.optBool(o, k, path);
        return;
      case "Precompiled":
        if (o.precompiled_charsmap !== null && o.precompiled_charsmap !== undefined) this.str(o.precompiled_charsmap, `${path}.precompiled_charsmap`, 1 << 20);
        return;
      case "Sequence":
        return this.list(o.normalizers, `${path}.normalizers`, depth, (x, p, d) => this.normalizer(x, p, d));
      case "Replace":
        this.pattern(o.pattern, `${path}.pattern`);
        this.str(o.content, `${path}.content`, MAX_INSERT_CHARS);
        return;
      case "Strip":
        this.optBool(o, "strip_left", path);
        this.optBool(o, "strip_right", path);
        return;
      case "Prepend":
        this.str(o.prepend, `${path}.prepend`, MAX_INSERT_CHARS);
        return;
      case "NFC":
      case "NFD":
      case "NFKC":
      case "NFKD":
      case "StripAccents":
      case "Lowercase":
        return;
      default:
        this.fail(`${path}.type`, `${describeValue(o.type)}: not a normalizer type`);
    }
  }

  preTokenizer(v: unknown, path: string, depth: number): void {
    if (v === null) return;
    const o = this.obj(v, path);
    switch (this.type(o, path)) {
      case "Sequence":
        return this.list(o.pretokenizers, `${path}.pretokenizers`, depth, (x, p, d) => this.preTokenizer(x, p, d));
      case "Split":
        this.pattern(o.pattern, `${path}.pattern`);
        this.optEnum(o, "behavior", path, ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]);
        this.optBool(o, "invert", path);
        return;
      case "Replace":
        this.pattern(o.pattern, `${path}.pattern`);
        this.str(o.content, `${path}.content`, MAX_INSERT_CHARS);
        return;
      case "Metaspace":
        this.optStr(o, "replacement", path);
        this.optBool(o, "add_prefix_space", path);
        this.optBool(o, "split", path);
        this.optEnum(o, "prepend_scheme", path, ["first", "always", "never"]);
        return;
      case "ByteLevel":
        for (const k of ["add_prefix_space", "trim_offsets", "use_regex"]) this.optBool(o, k, path);
        return;
      case "Punctuation":
        this.optEnum(o, "behavior", path, ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]);
        return;
      case "Digits":
        this.optBool(o, "individual_digits", path);
        return;
      case "FixedLength":
        this.optInt(o, "length", path, 1, MAX_TOKEN_CHARS);
        return;
      case "BertPreTokenizer":
      case "Whitespace":
      case "WhitespaceSplit":
        return;
      default:
        this.fail(`${path}.type`, `${describeValue(o.type)}: not a pre-tokenizer type`);
    }
  }

  postProcessor(v: unknown, path: string, depth: number): void {
    if (v === null) return;
    const o = this.obj(v, path);
    switch (this.type(o, path)) {
      case "TemplateProcessing": {
        for (const k of ["single", "pair"]) {
          if (o[k] === undefined) continue;
          this.arr(o[k], `${path}.${k}`).forEach((piece, i) => {
            const pp = `${path}.${k}[${i}]`;
            const p = this.obj(piece, pp);
            const inner = p.SpecialToken ?? p.Sequence;
            if (inner === undefined) this.fail(pp, `${describeValue(piece)}: expected {"SpecialToken": …} or {"Sequence": …}`);
            const q = this.obj(inner, `${pp}.${p.SpecialToken !== undefined ? "SpecialToken" : "Sequence"}`);
            this.str(q.id, `${pp}.id`);
            this.optInt(q, "type_id", pp, 0, 255);
          });
        }
        if (o.special_tokens !== undefined) {
          const st = this.obj(o.special_tokens, `${path}.special_tokens`);
          for (const [name, t] of Object.entries(st)) {
            const tp = `${path}.special_tokens[${describeValue(name)}]`;
            const to = this.obj(t, tp);
            this.str(to.id, `${tp}.id`);
            this.arr(to.ids, `${tp}.ids`).forEach((x, i) => this.id(x, `${tp}.ids[${i}]`));
            this.arr(to.tokens, `${tp}.tokens`).forEach((x, i) => this.str(x, `${tp}.tokens[${i}]`));
          }
        }
        return;
      }
      case "BertProcessing":
      case "RobertaProcessing":
        for (const k of ["sep", "cls"]) {
          const pair = this.arr(o[k], `${path}.${k}`);
          if (pair.length !== 2) this.fail(`${path}.${k}`, `expected [token, id]`);
          this.str(pair[0], `${path}.${k}[0]`);
          this.id(pair[1], `${path}.${k}[1]`);
        }
        for (const k of ["trim_offsets", "add_prefix_space"]) this.optBool(o, k, path);
        return;
      case "ByteLevel":
        return;
      case "Sequence":
        return this.list(o.processors, `${path}.processors`, depth, (x, p, d) => this.postProcessor(x, p, d));
      default:
        this.fail(`${path}.type`, `${describeValue(o.type)}: not a post-processor type`);
    }
  }

  decoder(v: unknown, path: string, depth: number): void {
    if (v === null) return;
    const o = this.obj(v, path);
    switch (this.type(o, path)) {
      case "Sequence":
        return this.list(o.decoders, `${path}.decoders`, depth, (x, p, d) => this.decoder(x, p, d));
      case "Replace":
        this.pattern(o.pattern, `${path}.pattern`);
        this.str(o.content, `${path}.content`, MAX_INSERT_CHARS);
        return;
      case "WordPiece":
        this.optStr(o, "prefix", path);
        this.optBool(o, "cleanup", path);
        return;
      case "Metaspace":
        this.optStr(o, "replacement", path);
        this.optBool(o, "add_prefix_space", path);
        this.optEnum(o, "prepend_scheme", path, ["first", "always", "never"]);
        return;
      case "BPEDecoder":
        this.optStr(o, "suffix", path);
        return;
      case "CTC":
        this.optStr(o, "pad_token", path);
        this.optStr(o, "word_delimiter_token", path);
        this.optBool(o, "cleanup", path);
        return;
      case "Strip":
        this.optStr(o, "content", path);
        this.optInt(o, "start", path, 0, MAX_TOKEN_CHARS);
        this.optInt(o, "stop", path, 0, MAX_TOKEN_CHARS);
        return;
      case "ByteLevel":
      case "Fuse":
      case "ByteFallback":
        return;
      default:
        this.fail(`${path}.type`, `${describeValue(o.type)}: not a decoder type`);
    }
  }

  /** A token → id object: tokens strings, ids unique integers. Returns token → id. */
  vocabMap(v: unknown, path: string): Map<string, number> {
    const o = this.obj(v, path);
    const byId = new Map<number, string>();
    const out = new Map<string, number>();
    for (const [tok, id] of Object.entries(o)) {
      const p = `${path}[${describeValue(tok)}]`;
      this.str(tok, p);
      const n = this.id(id, p);
      const other = byId.get(n);
      if (other !== undefined) this.fail(p, `id ${n} is also the id of ${describeValue(other)} (ids must be unique)`);
      byId.set(n, tok);
      out.set(tok, n);
    }
    if (out.size === 0) this.fail(path, "no vocabulary (it is empty)");
    return out;
  }

  model(v: unknown, path: string): void {
    const m = this.obj(v, path);
    const type = m.type === undefined ? undefined : this.str(m.type, `${path}.type`, 64);
    for (const k of ["unk_token", "continuing_subword_prefix", "end_of_word_suffix", "continuing_subword_suffix"]) this.optStr(m, k, path);
    for (const k of ["fuse_unk", "byte_fallback", "ignore_merges"]) this.optBool(m, k, path);
    switch (type) {
      case "BPE": {
        const vocab = this.vocabMap(m.vocab, `${path}.vocab`);
        if (m.dropout !== undefined && m.dropout !== null && !(typeof m.dropout === "number" && m.dropout >= 0 && m.dropout <= 1)) this.fail(`${path}.dropout`, `${describeValue(m.dropout)}: expected a number in [0, 1] or null`);
        const merges = m.merges === undefined ? [] : this.arr(m.merges, `${path}.merges`);
        const pairs = merges.length > 0 && Array.isArray(merges[0]);
        const prefix = typeof m.continuing_subword_prefix === "string" ? m.continuing_subword_prefix : "";
        merges.forEach((x, i) => {
          const p = `${path}.merges[${i}]`;
          let a: string, b: string;
          if (pairs) {
            if (!Array.isArray(x) || x.length !== 2) this.fail(p, `${describeValue(x)}: expected a pair [left, right] (as merges[0] is)`);
            const pair = x as unknown[];
            a = this.str(pair[0], `${p}[0]`);
            b = this.str(pair[1], `${p}[1]`);
          } else {
            const s = this.str(x, p);
            const parts = s.split(" ");
            if (parts.length !== 2 || parts[0] === "" || parts[1] === "") this.fail(p, `${describeValue(x)}: expected "left right" (two tokens, one space; as merges[0] is)`);
            [a, b] = parts as [string, string];
          }
          for (const t of [a, b]) if (!vocab.has(t)) this.fail(p, `${describeValue(t)} is not in model.vocab`);
          const merged = a + (prefix !== "" && b.startsWith(prefix) ? b.slice(prefix.length) : b);
          if (!vocab.has(merged)) this.fail(p, `the merged token ${describeValue(merged)} is not in model.vocab`);
        });
        return;
      }
      case "WordPiece":
        this.vocabMap(m.vocab, `${path}.vocab`);
        this.optInt(m, "max_input_chars_per_word", path, 1, 1000);
        return;
      case "WordLevel":
        this.vocabMap(m.vocab, `${path}.vocab`);
        return;
      case "Unigram": {
        const vocab = this.arr(m.vocab, `${path}.vocab`);
        if (vocab.length === 0) this.fail(`${path}.vocab`, "no vocabulary (it is empty)");
        if (vocab.length > MAX_TOKEN_ID) this.fail(`${path}.vocab`, `${vocab.length} pieces (at most ${MAX_TOKEN_ID})`);
        vocab.forEach((x, i) => {
          const p = `${path}.vocab[${i}]`;
          const pair = this.arr(x, p);
          if (pair.length !== 2) this.fail(p, `${describeValue(x)}: expected [piece, score]`);
          this.str(pair[0], `${p}[0]`);
          if (typeof pair[1] !== "number" || !Number.isFinite(pair[1])) this.fail(`${p}[1]`, `${describeValue(pair[1])}: expected a finite score`);
        });
        this.optInt(m, "unk_id", path, 0, vocab.length - 1);
        return;
      }
      default:
        this.fail(`${path}.type`, `${describeValue(m.type)}: expected "BPE", "WordPiece", "Unigram" or "WordLevel"`);
    }
  }
}

/**
 * Check `text` (a tokenizer.json's contents) against {@link TOKENIZER_JSON_LIMITS} and parse it.
 * @throws DataError naming `file` and the JSON path of the first violation, or the parse error.
 */
export function parseTokenizerJsonText(text: string, file: string): Obj {
  const bad = scanJsonBounds(text, TOKENIZER_JSON_LIMITS);
  if (bad !== null) throw new DataError(`tokenizer ${pathForMessage(file)}: ${bad.path === "" ? "" : `${bad.path}: `}${bad.message}`);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new DataError(`tokenizer ${pathForMessage(file)}: not valid JSON (${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)})`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new DataError(`tokenizer ${pathForMessage(file)}: expected a JSON object, got ${describeValue(v)}`);
  return v as Obj;
}

/**
 * Check a parsed tokenizer.json (module comment) before it reaches the library.
 * @throws DataError naming `file`, the JSON path and what was expected.
 */
export function checkTokenizerJson(json: Obj, file: string): void {
  const c = new Checker(file);
  c.model(json.model, "model");
  for (const k of ["normalizer", "pre_tokenizer", "post_processor", "decoder"]) if (!(k in json)) c.fail(k, "missing (expected an object or null)");
  c.normalizer(json.normalizer, "normalizer", 0);
  c.preTokenizer(json.pre_tokenizer, "pre_tokenizer", 0);
  c.postProcessor(json.post_processor, "post_processor", 0);
  c.decoder(json.decoder, "decoder", 0);
  const added = json.added_tokens === undefined ? [] : c.arr(json.added_tokens, "added_tokens");
  const ids = new Map<number, number>();
  added.forEach((t, i) => {
    const p = `added_tokens[${i}]`;
    const o = c.obj(t, p);
    const content = c.str(o.content, `${p}.content`);
    if (content === "") c.fail(`${p}.content`, "empty (expected the token's text)");
    const id = c.id(o.id, `${p}.id`);
    const j = ids.get(id);
    if (j !== undefined) c.fail(`${p}.id`, `${id} is also added_tokens[${j}].id (ids must be unique)`);
    ids.set(id, i);
    for (const k of ["special", "lstrip", "rstrip", "normalized", "single_word"]) c.optBool(o, k, p);
  });
}

/**
 * Check a parsed tokenizer_config.json's fields that the library reads.
 * @throws DataError naming `file` and the key.
 */
export function checkTokenizerConfig(cfg: Obj, file: string): void {
  const c = new Checker(file);
  for (const k of ["remove_space", "do_lowercase_and_remove_accent", "clean_up_tokenization_spaces", "legacy"]) c.optBool(cfg, k, "tokenizer_config");
  if (cfg.additional_special_tokens !== undefined && cfg.additional_special_tokens !== null)
    c.arr(cfg.additional_special_tokens, "additional_special_tokens").forEach((x, i) => {
      if (typeof x !== "string" && !(x !== null && typeof x === "object" && typeof (x as Obj).content === "string")) c.fail(`additional_special_tokens[${i}]`, `${describeValue(x)}: expected a string`);
    });
  for (const k of ["eos_token", "bos_token", "unk_token", "pad_token"]) {
    const v = cfg[k];
    if (v === undefined || v === null || typeof v === "string") continue;
    if (typeof v === "object" && !Array.isArray(v) && typeof (v as Obj).content === "string") continue;
    c.fail(k, `${describeValue(v)}: expected a string or {"content": string}`);
  }
}
