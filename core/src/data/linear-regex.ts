/**
 * Regexes carried by an untrusted tokenizer.json (Split pre-tokenizers, Replace normalizers,
 * pre-tokenizers and decoders), run in linear time by npm `re2js` (a port of RE2: an automaton,
 * no backtracking; pinned in core/package.json) instead of the JavaScript engine, which backtracks:
 * `.*.*.*=.*` took longer than 10 s on a few kilobytes of text (issue 32).
 *
 * The patterns are Oniguruma syntax (the Rust `tokenizers` library's engine). {@link translateOniguruma}
 * rewrites them into RE2 syntax with Oniguruma's Unicode meanings, as `@huggingface/tokenizers`
 * does for JavaScript: `\s` = `\p{White_Space}`, `\d` = `\p{Nd}`, `\w` = letters, marks, decimal
 * digits and connector punctuation, `\h` = a hex digit, `\uHHHH` = `\x{HHHH}`. `\b`/`\B` keep RE2's
 * ASCII word boundary (no Hub tokenizer we know uses them).
 *
 * RE2 has no lookahead. The one form the Hub's patterns use — a final single-character assertion
 * closing a top-level alternative, `\s+(?!\S)` in GPT-2, Llama-3, Qwen2, DeepSeek-V3, Mistral
 * Tekken — is run exactly: `X(?!C)` becomes `X(?:([^C])|\z)` and `X(?=C)` becomes `X(C)`, and a
 * match whose marker group took a character ends where that group starts (the same alternative
 * wins at the same place: the alternatives are tried in the same order and accept under the same
 * condition). Any other lookahead, atomic groups, possessive quantifiers, backreferences, nested
 * classes and class set operations are refused with {@link UnsafeRegexError} naming the construct:
 * they are what backtracking needs, and a pattern the linear engine cannot express is not run at all.
 *
 * {@link LinearRegExp} stands in for a global `RegExp` where the library uses one (`String.prototype`
 * `match`, `matchAll`, `split`, `replaceAll` call its `Symbol.*` methods). Replacement results are
 * bounded ({@link MAX_REPLACE_GROWTH}): a Replace normalizer that inserts a long string at every
 * empty match would otherwise turn 1 MB of text into gigabytes.
 */
import { RE2JS } from "re2js";
import { quoteUntrusted, QUOTE_MESSAGE_CHARS } from "../config/quote-untrusted.ts";

/** Longest pattern accepted (characters); Hub patterns are under 400. */
export const MAX_PATTERN_CHARS = 4096;
/** A replacement may make the text at most this many times longer, plus {@link REPLACE_SLACK} characters. */
export const MAX_REPLACE_GROWTH = 4;
const REPLACE_SLACK = 4096;

/** Ceiling on any replacement's result while {@link withReplaceBudget} runs (characters). */
let replaceBudget = Infinity;

/**
 * Run `fn` with every {@link LinearRegExp} replacement's result capped at `maxChars` characters
 * (a bound on one encode call's text, whatever chain of Replace components the tokenizer has).
 */
export function withReplaceBudget<T>(maxChars: number, fn: () => T): T {
  const prev = replaceBudget;
  replaceBudget = Math.min(prev, maxChars);
  try {
    return fn();
  } finally {
    replaceBudget = prev;
  }
}

/** `s` as a pattern matching it literally (every ASCII non-alphanumeric escaped). */
export function literalPattern(s: string): string {
  return s.replace(/[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e ]/g, "\\$&");
}

/** A pattern the linear-time engine cannot run (the construct is named in the message). */
export class UnsafeRegexError extends Error {
  override name = "UnsafeRegexError";
}

/** A bounded piece of work exceeded its limit while running a tokenizer.json regex. */
export class RegexWorkLimitError extends Error {
  override name = "RegexWorkLimitError";
}

/** Result of {@link translateOniguruma}. */
export interface TranslatedPattern {
  /** RE2 syntax. */
  source: string;
  /** Capture groups of the original pattern, by their RE2 number (markers excluded), in order. */
  userGroups: number[];
  /** RE2 numbers of the lookahead marker groups: a match ends where the participating one starts. */
  markers: number[];
  /** The single-character class each marker group takes, RE2 syntax. */
  markerClasses: string[];
  /** Whether the pattern has lookbehind (compiled with re2js's linear lookbehind support). */
  lookbehind: boolean;
}

const WORD_IN_CLASS = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";
const HEX_IN_CLASS = "0-9A-Fa-f";
/** Oniguruma escapes → RE2, outside a class. */
const ESCAPES: Readonly<Record<string, string>> = {
  s: "\\p{White_Space}",
  S: "\\P{White_Space}",
  d: "\\p{Nd}",
  D: "\\P{Nd}",
  w: `[${WORD_IN_CLASS}]`,
  W: `[^${WORD_IN_CLASS}]`,
  h: `[${HEX_IN_CLASS}]`,
  H: `[^${HEX_IN_CLASS}]`,
};
/** The same inside a class (where a negated form cannot be written as a member). */
const CLASS_ESCAPES: Readonly<Record<string, string>> = {
  s: "\\p{White_Space}",
  S: "\\P{White_Space}",
  d: "\\p{Nd}",
  D: "\\P{Nd}",
  w: WORD_IN_CLASS,
  h: HEX_IN_CLASS,
};

/**
 * Read one escape at `src[i] === "\\"`, translated. Returns the RE2 text and the index after it.
 * @throws UnsafeRegexError on a backreference or an escape with no linear meaning.
 */
function readEscape(src: string, i: number, inClass: boolean): [string, number] {
  const c = src[i + 1];
  if (c === undefined) throw new UnsafeRegexError("the pattern ends with a lone backslash");
  if (/[pPx]/.test(c) && src[i + 2] === "{") {
    const close = src.indexOf("}", i + 3);
    if (close < 0) throw new UnsafeRegexError(`unterminated \\${c}{`);
    return [src.slice(i, close + 1), close + 1];
  }
  if (c === "u" && /^[0-9A-Fa-f]{4}$/.test(src.slice(i + 2, i + 6))) return [`\\x{${src.slice(i + 2, i + 6)}}`, i + 6];
  if (!inClass && /[1-9k]/.test(c)) throw new UnsafeRegexError(`backreference \\${c} (needs backtracking)`);
  if (c === "G" || c === "K" || c === "Z" || c === "R" || c === "X" || c === "y" || c === "Y") throw new UnsafeRegexError(`escape \\${c} has no linear-time form`);
  const table = inClass ? CLASS_ESCAPES : ESCAPES;
  if (Object.hasOwn(table, c)) return [table[c]!, i + 2];
  if (inClass && (c === "W" || c === "H")) throw new UnsafeRegexError(`\\${c} inside a character class`);
  return [src.slice(i, i + 2), i + 2];
}

/**
 * Read a character class at `src[i] === "["`. Returns its RE2 text, the text of its complement, and
 * the index after it.
 * @throws UnsafeRegexError on a nested class or a set operation (`&&`).
 */
function readClass(src: string, i: number): [string, string, number] {
  let j = i + 1;
  let negated = false;
  if (src[j] === "^") {
    negated = true;
    j++;
  }
  let body = "";
  if (src[j] === "]") {
    body += "\\]";
    j++;
  }
  for (;;) {
    const c = src[j];
    if (c === undefined) throw new UnsafeRegexError("unterminated character class");
    if (c === "]") break;
    if (c === "\\") {
      const [t, k] = readEscape(src, j, true);
      body += t;
      j = k;
      continue;
    }
    if (c === "[") {
      const posix = /^\[:\^?[a-z]+:\]/.exec(src.slice(j, j + 16));
      if (!posix) throw new UnsafeRegexError("nested character class (Oniguruma set syntax)");
      body += posix[0];
      j += posix[0].length;
      continue;
    }
    if (c === "&" && src[j + 1] === "&") throw new UnsafeRegexError("character class intersection (&&)");
    body += c;
    j++;
  }
  const cls = `[${negated ? "^" : ""}${body}]`;
  const complement = `[${negated ? "" : "^"}${body}]`;
  return [cls, complement, j + 1];
}

/**
 * Read the single-character atom of a lookahead at `src[i]` (just after `(?!` / `(?=`), which must
 * be followed by `)`. Returns [atom, complement of atom, index after the `)`].
 * @throws UnsafeRegexError when the lookahead is not one character or class.
 */
function readLookaheadAtom(src: string, i: number): [string, string, number] {
  let atom: string;
  let complement: string;
  let j: number;
  const c = src[i];
  if (c === "[") {
    [atom, complement, j] = readClass(src, i);
  } else if (c === "\\") {
    const [t, k] = readEscape(src, i, false);
    j = k;
    if (t.startsWith("[")) {
      atom = t;
      complement = t.startsWith("[^") ? `[${t.slice(2)}` : `[^${t.slice(1)}`;
    } else if (/^\\[pP]\{/.test(t)) {
      atom = t;
      complement = `${t[1] === "p" ? "\\P" : "\\p"}${t.slice(2)}`;
    } else if (/^\\[tnrfvae\\.()[\]{}|^$*+?\-/ ]$/.test(t) || /^\\x\{/.test(t)) {
      atom = t;
      complement = `[^${t}]`;
    } else {
      throw new UnsafeRegexError(`lookahead on ${t} (only a single character or class is supported)`);
    }
  } else if (c === ".") {
    atom = ".";
    complement = "\\n";
    j = i + 1;
  } else if (c !== undefined && !"()|*+?{}^$".includes(c)) {
    atom = c;
    complement = `[^${c}]`;
    j = i + c.length;
  } else {
    throw new UnsafeRegexError("lookahead that is not a single character or class");
  }
  if (src[j] !== ")") throw new UnsafeRegexError("lookahead longer than one character or class (only a final `(?!C)` / `(?=C)` is supported)");
  return [atom, complement, j + 1];
}

/**
 * Translate an Oniguruma pattern (a tokenizer.json `pattern.Regex`) into RE2 syntax (module comment).
 * @throws UnsafeRegexError naming the construct the linear-time engine cannot run.
 */
export function translateOniguruma(src: string): TranslatedPattern {
  if (src.length > MAX_PATTERN_CHARS) throw new UnsafeRegexError(`pattern of ${src.length} characters is over the ${MAX_PATTERN_CHARS}-character limit`);
  let out = "";
  let depth = 0;
  let group = 0;
  const userGroups: number[] = [];
  const markers: number[] = [];
  const markerClasses: string[] = [];
  let lookbehind = false;
  /** Set after a lookahead: only `|` at depth 0 or the end may follow. */
  let afterLookahead = false;
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (afterLookahead && !(c === "|" && depth === 0)) throw new UnsafeRegexError("lookahead not at the end of a top-level alternative");
    afterLookahead = false;
    if (c === "\\") {
      const [t, k] = readEscape(src, i, false);
      out += t;
      i = k;
    } else if (c === "[") {
      const [t, , k] = readClass(src, i);
      out += t;
      i = k;
    } else if (c === "(") {
      if (src[i + 1] !== "?") {
        group++;
        userGroups.push(group);
        depth++;
        out += "(";
        i++;
      } else {
        const rest = src.slice(i + 2, i + 4);
        if (rest[0] === "=" || rest[0] === "!") {
          if (depth !== 0) throw new UnsafeRegexError("lookahead inside a group (only a final `(?!C)` / `(?=C)` of a top-level alternative is supported)");
          const [atom, complement, k] = readLookaheadAtom(src, i + 3);
          group++;
          markers.push(group);
          markerClasses.push(rest[0] === "!" ? complement : atom);
          out += rest[0] === "!" ? `(?:(${complement})|\\z)` : `(${atom})`;
          i = k;
          afterLookahead = true;
        } else if (rest === "<=" || rest === "<!") {
          lookbehind = true;
          depth++;
          out += `(?${rest}`;
          i += 4;
        } else if (rest[0] === "<" || rest[0] === "P") {
          const m = /^\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>/.exec(src.slice(i, i + 80));
          if (!m) throw new UnsafeRegexError("malformed named group");
          group++;
          userGroups.push(group);
          depth++;
          out += `(?P<${m[1]}>`;
          i += m[0].length;
        } else if (rest[0] === ">") {
          throw new UnsafeRegexError("atomic group (?>…) (needs backtracking)");
        } else if (rest[0] === "#") {
          throw new UnsafeRegexError("comment group (?#…)");
        } else {
          // flag groups: (?i) (?i:…) (?-i:…) (?:…)
          const m = /^\(\?([imsx-]*)(:|\))/.exec(src.slice(i, i + 16));
          if (!m) throw new UnsafeRegexError(`group syntax ${JSON.stringify(src.slice(i, i + 4))}`);
          if (m[1]!.includes("x")) throw new UnsafeRegexError("extended-syntax flag (?x)");
          // Oniguruma's (?m) is dot-matches-newline, RE2's (?s)
          const flags = m[1]!.replace(/m/g, "s");
          if (m[2] === ":") depth++;
          out += `(?${flags}${m[2]}`;
          i += m[0].length;
        }
      }
    } else if (c === ")") {
      if (depth === 0) throw new UnsafeRegexError("unbalanced )");
      depth--;
      out += ")";
      i++;
    } else if (c === "^" || c === "$") {
      // Oniguruma's ^ and $ are line anchors
      out += `(?m:${c})`;
      i++;
    } else if ((c === "+" || c === "*" || c === "?" || c === "}") && src[i + 1] === "+") {
      throw new UnsafeRegexError("possessive quantifier (needs backtracking)");
    } else {
      out += c;
      i++;
    }
  }
  if (depth !== 0) throw new UnsafeRegexError("unbalanced (");
  return { source: out, userGroups, markers, markerClasses, lookbehind };
}

/** One match: [start, end) in UTF-16 units and the user groups' texts (undefined if not taken). */
interface Found {
  start: number;
  end: number;
  groups: (string | undefined)[];
}

/**
 * A global, Unicode `RegExp` stand-in run by re2js (module comment). Supports what
 * `@huggingface/tokenizers` does with its patterns: `str.match`, `str.matchAll`, `str.split`,
 * `str.replace`/`replaceAll` (string replacements; `$$ $& $1…$99` substitutions).
 */
export class LinearRegExp {
  /** The Oniguruma pattern as given. */
  readonly source: string;
  readonly flags = "gu";
  readonly global = true;
  readonly unicode = true;
  /** Like RegExp's; reset by every call (the methods below do not use it). */
  lastIndex = 0;
  private readonly re: RE2JS;
  private readonly t: TranslatedPattern;
  /** One character a marker group can take (the union of the markers' classes), or null. */
  private readonly markerClass: RE2JS | null;
  private readonly markerCache = new Map<number, boolean>();

  /** @throws UnsafeRegexError (the construct named) when re2js cannot compile `source` in linear form. */
  constructor(source: string) {
    this.source = source;
    this.t = translateOniguruma(source);
    try {
      this.re = RE2JS.compile(this.t.source, this.t.lookbehind ? RE2JS.LOOKBEHINDS : 0);
      this.markerClass = this.t.markerClasses.length === 0 ? null : RE2JS.compile(this.t.markerClasses.join("|"));
    } catch (e) {
      throw new UnsafeRegexError(`not compiled by the linear-time engine: ${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)}`);
    }
  }

  /**
   * Every match, left to right (an empty match advances one code point). The groups are asked of
   * re2js only when needed (it computes them in a second, slower pass): a marker group only when
   * the match's last character could be the one it took.
   */
  private *scan(text: string, wantGroups: boolean): Generator<Found> {
    const m = this.re.matcher(text);
    const markerClass = this.markerClass;
    let pos = 0;
    while (pos <= text.length && m.find(pos)) {
      const start = m.start();
      let end = m.end();
      if (markerClass !== null && end > start) {
        const last = text.codePointAt(end - 1 > start && (text.charCodeAt(end - 1) & 0xfc00) === 0xdc00 ? end - 2 : end - 1)!;
        let hit = this.markerCache.get(last);
        if (hit === undefined) {
          hit = markerClass.matches(String.fromCodePoint(last));
          if (this.markerCache.size < 4096) this.markerCache.set(last, hit);
        }
        if (hit)
          for (const g of this.t.markers) {
            const s = m.start(g);
            if (s >= 0) end = s;
          }
      }
      const groups = wantGroups ? this.t.userGroups.map((g) => m.group(g) ?? undefined) : [];
      yield { start, end, groups };
      if (end > start) pos = end;
      else {
        const cp = text.codePointAt(end);
        pos = end + (cp !== undefined && cp > 0xffff ? 2 : 1);
      }
    }
  }

  [Symbol.match](text: string): string[] | null {
    const out: string[] = [];
    for (const f of this.scan(String(text), false)) out.push(text.slice(f.start, f.end));
    return out.length === 0 ? null : out;
  }

  *[Symbol.matchAll](text: string): Generator<RegExpMatchArray> {
    const s = String(text);
    for (const f of this.scan(s, this.t.userGroups.length > 0)) {
      const arr = [s.slice(f.start, f.end), ...f.groups] as RegExpMatchArray;
      arr.index = f.start;
      arr.input = s;
      yield arr;
    }
  }

  /** ECMAScript `RegExp.prototype[@@split]`: the pieces between matches, each followed by the user groups. */
  [Symbol.split](text: string, limit?: number): string[] {
    const s = String(text);
    const max = limit === undefined ? 2 ** 32 - 1 : limit >>> 0;
    const out: string[] = [];
    if (max === 0) return out;
    if (s.length === 0) {
      for (const _ of this.scan(s, false)) return out;
      return [s];
    }
    let prev = 0;
    for (const f of this.scan(s, this.t.userGroups.length > 0)) {
      if (f.start >= s.length) break;
      // an empty match where the last piece ended splits nothing
      if (f.end === prev && f.start === prev) continue;
      out.push(s.slice(prev, f.start));
      if (out.length >= max) return out;
      for (const g of f.groups) {
        out.push(g as string);
        if (out.length >= max) return out;
      }
      prev = f.end;
    }
    out.push(s.slice(prev));
    return out;
  }

  [Symbol.replace](text: string, replacement: unknown): string {
    const s = String(text);
    if (typeof replacement === "function") throw new TypeError("LinearRegExp: function replacements are not supported");
    const rep = String(replacement);
    const limit = Math.min(replaceBudget, MAX_REPLACE_GROWTH * s.length + REPLACE_SLACK);
    let out = "";
    let prev = 0;
    const wantGroups = this.t.userGroups.length > 0 && /\$\d/.test(rep);
    for (const f of this.scan(s, wantGroups)) {
      out += s.slice(prev, f.start) + substitute(rep, s, f);
      prev = f.end;
      if (out.length > limit) throw new RegexWorkLimitError(`a replacement of ${quoteUntrusted(this.source)} made ${s.length} characters into more than ${limit}`);
    }
    return out + s.slice(prev);
  }
}

/** `rep` with `$$`, `$&`, `` $` ``, `$'` and `$n`/`$nn` substituted (ECMAScript GetSubstitution). */
function substitute(rep: string, s: string, f: Found): string {
  if (!rep.includes("$")) return rep;
  return rep.replace(/\$(\$|&|`|'|\d{1,2})/g, (all, k: string) => {
    if (k === "$") return "$";
    if (k === "&") return s.slice(f.start, f.end);
    if (k === "`") return s.slice(0, f.start);
    if (k === "'") return s.slice(f.end);
    let n = Number(k);
    if (n > f.groups.length && k.length === 2) n = Number(k[0]);
    if (n === 0 || n > f.groups.length) return all;
    return (f.groups[n - 1] ?? "") + (k.length === 2 && Number(k) > f.groups.length ? k[1] : "");
  });
}
