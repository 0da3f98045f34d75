/**
 * core/src/data/linear-regex.ts against the JavaScript engine on the Hub's pre-tokenizer patterns
 * (as `@huggingface/tokenizers` compiles them: its own Oniguruma → JavaScript rewrite): the same
 * matches, splits and replacements on random text drawn from letters (Latin, CJK, combining marks),
 * digits, punctuation, apostrophes, Unicode spaces (NBSP, U+0085, U+3000), newlines and astral
 * characters. Exact equality: both engines must pick the same leftmost-first matches.
 * Then the constructs the linear engine refuses, and the catastrophic patterns of issue 32 run in
 * bounded time on inputs where the JavaScript engine backtracks.
 */
import { describe, expect, test } from "bun:test";
import { Tokenizer } from "@huggingface/tokenizers";
import { LinearRegExp, RegexWorkLimitError, translateOniguruma, UnsafeRegexError } from "../../src/data/linear-regex.ts";
import { Rng } from "../../src/data/prng.ts";

/** Patterns from the Hub's tokenizer.json files (Split pre-tokenizers). */
export const HUB_PATTERNS: Record<string, string> = {
  gpt2: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
  llama3: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  qwen2: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  o200k:
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  deepseekDigits: "\\p{N}{1,3}",
  deepseekCjk: "[一-龥぀-ゟ゠-ヿ]+",
  deepseekMain: "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  positiveLookahead: "\\w+(?=[.!?])|\\d+|\\s",
  anchors: "^\\s+|\\s+$|\\w+",
  escapes: "\\d+|\\w+|\\h+|[\\s\\d]+|\\u00e9",
};

/** The library's own JavaScript RegExp for `pattern` (taken from a Split pre-tokenizer it built). */
function libraryRegExp(pattern: string): RegExp {
  const tok = new Tokenizer(
    {
      model: { type: "WordLevel", vocab: { a: 0 }, unk_token: "a" },
      normalizer: null,
      pre_tokenizer: { type: "Split", pattern: { Regex: pattern }, behavior: "Isolated", invert: false },
      post_processor: null,
      decoder: null,
      added_tokens: [],
    },
    {},
  ) as unknown as { pre_tokenizer: { pattern: RegExp } };
  return tok.pre_tokenizer.pattern;
}

const PIECES = ["a", "Z", "é", "e\u0301", "ß", "中", "文", "ア", "7", "42", "٣", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u0085", "\u3000", "'s", "'T", "'ll", ".", "!", "?", ",", "-", "/", "$", "😀", "𝒳", "_", "x1"];
function randomText(rand: () => number, n: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += PIECES[Math.floor(rand() * PIECES.length)];
  return s;
}

describe("LinearRegExp = the JavaScript engine on Hub patterns", () => {
  for (const [name, pattern] of Object.entries(HUB_PATTERNS)) {
    test(name, () => {
      const js = libraryRegExp(pattern);
      const lin = new LinearRegExp(pattern);
      const rng = new Rng(0x5eed ^ name.length);
      const rand = () => rng.nextU32() / 2 ** 32;
      for (let k = 0; k < 300; k++) {
        const text = randomText(rand, 1 + Math.floor(rand() * 40));
        expect([...text.matchAll(lin as unknown as RegExp)].map((m) => [m.index, m[0]])).toEqual([...text.matchAll(js)].map((m) => [m.index, m[0]]));
        expect(text.match(lin as unknown as RegExp)).toEqual(text.match(js));
        expect(text.split(lin as unknown as RegExp)).toEqual(text.split(js));
        expect(text.replaceAll(lin as unknown as RegExp, "<$&>")).toEqual(text.replaceAll(js, "<$&>"));
      }
    });
  }

  test("split with capture groups and empty matches, like RegExp", () => {
    for (const p of ["(-)|,", "x*", "(a)(b)?", "\\b"]) {
      const js = new RegExp(p, "gu");
      const lin = new LinearRegExp(p);
      for (const t of ["", "a-b,c", "xxaxbx", "ab a abab", "hello world"]) {
        expect(t.split(lin as unknown as RegExp)).toEqual(t.split(js));
        expect(t.split(lin as unknown as RegExp, 2)).toEqual(t.split(js, 2));
      }
    }
  });
});

describe("patterns the linear engine refuses, naming the construct", () => {
  const cases: [string, string][] = [
    ["(a+)\\1", "backreference"],
    ["(?>a+)b", "atomic group"],
    ["a++b", "possessive"],
    ["\\s+(?!\\S\\S)", "lookahead longer"],
    ["(?:\\s+(?!\\S))", "lookahead inside a group"],
    ["a(?!b)c", "not at the end"],
    ["[a-z&&b]", "intersection"],
    ["[a[bc]]", "nested character class"],
    ["x".repeat(5000), "limit"],
  ];
  for (const [p, what] of cases)
    test(what, () => {
      let err: unknown;
      try {
        new LinearRegExp(p);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(UnsafeRegexError);
      expect((err as Error).message).toContain(what);
    });
});

describe("catastrophic patterns run in linear time", () => {
  // The JavaScript engine needs O(n^4) steps for the first on text without '=' (issue 32: > 10 s on
  // a few kilobytes) and O(2^n) for the others; re2js needs O(n). The inputs here are 200,000
  // characters; the hang guard is the test timeout, no time is asserted.
  for (const p of [".*.*.*=.*", "(a+)+$", "(a|aa)*c", "(\\w+\\s?)*$", "(.*a){12}"])
    test(p, () => {
      const lin = new LinearRegExp(p);
      const text = "a".repeat(200_000) + "!";
      expect(() => [...text.matchAll(lin as unknown as RegExp)]).not.toThrow();
    }, 300_000);

  test("a replacement that would grow the text without bound is stopped", () => {
    const lin = new LinearRegExp("");
    expect(() => "abc".repeat(10_000).replaceAll(lin as unknown as RegExp, "x".repeat(100))).toThrow(RegexWorkLimitError);
  });

  test("translation keeps Unicode meanings", () => {
    expect(translateOniguruma("\\s\\d").source).toBe("\\p{White_Space}\\p{Nd}");
    expect(translateOniguruma("\\s+(?!\\S)").markers).toEqual([1]);
  });
});
