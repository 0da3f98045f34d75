/**
 * The one rendering of an untrusted string (a name or value read from a file, an argument, an
 * environment variable) inside an error or log message: double-quoted, at most a bounded prefix
 * of it (40 characters by default) followed by its full length when it is longer, and every
 * character that could change what the terminal shows escaped.
 *
 * Escaped (JSON-style, so the rendering reads as a JSON string literal): `\` and `"`; the C0
 * controls (`\n`, `\r`, `\t`, others `\u00XX`), DEL and the C1 controls (U+0080–U+009F: ESC and CSI
 * start terminal escape sequences, so a hostile name could clear the screen or fake an `error:`
 * line); the line and paragraph separators U+2028/U+2029; the bidirectional formatting characters
 * (U+061C, U+200E/U+200F, U+202A–U+202E, U+2066–U+2069: "Trojan Source", CVE-2021-42574); U+FEFF;
 * and unpaired UTF-16 surrogates (also the half of a pair the cut would split). So a message that
 * quotes a value stays one line of at most a few hundred characters, whatever the value.
 *
 * Every reader's error path renders untrusted text through {@link quoteUntrusted} (directly or via
 * json-bounds.ts describeValue); docs/config.md and docs/checkpoints.md state the rule.
 */

/** Characters of an untrusted string echoed in a message (the rest is counted, not shown). */
export const QUOTE_CHARS = 40;

/** Characters of another library's error message echoed in ours (JSON.parse, CBOR, DEFLATE, the
 * tokenizer library): they quote the bad input themselves — JSC's JSON.parse puts a raw ESC of the
 * text into "Unrecognized token '…'" — so they are untrusted text too. */
export const QUOTE_MESSAGE_CHARS = 200;

/** Characters of an untrusted file path echoed in a message: longer than {@link QUOTE_CHARS} so a
 * real path stays readable, bounded so a path built from a hostile 10 MB name does not make a
 * 10 MB line (Linux's PATH_MAX is 4096 bytes; real paths are far shorter). */
export const QUOTE_PATH_CHARS = 512;

/** Characters escaped by {@link quoteUntrusted} (module comment), plus any surrogate (checked for
 * pairing in the replacer). */
const UNSAFE = /[\\"\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]/g;

function escapeChar(c: string, offset: number, s: string): string {
  const k = c.charCodeAt(0);
  if (k >= 0xd800 && k <= 0xdbff) {
    const next = s.charCodeAt(offset + 1);
    if (next >= 0xdc00 && next <= 0xdfff) return c; // the first half of a valid pair
  } else if (k >= 0xdc00 && k <= 0xdfff) {
    const prev = s.charCodeAt(offset - 1);
    if (prev >= 0xd800 && prev <= 0xdbff) return c; // the second half of a valid pair
  }
  if (c === "\\") return "\\\\";
  if (c === '"') return '\\"';
  if (k === 10) return "\\n";
  if (k === 13) return "\\r";
  if (k === 9) return "\\t";
  return `\\u${k.toString(16).padStart(4, "0")}`;
}

/**
 * `s` as a double-quoted, escaped literal for a message (module comment): the first `max` UTF-16
 * code units, escaped, then `… (N characters)` with the full length when `s` is longer. Work and
 * output are bounded by `max`, not by `s.length` (a 10 MB name costs nothing).
 * @param s any string (a non-string is rendered by `String` first).
 * @param max code units shown; default {@link QUOTE_CHARS}; {@link QUOTE_PATH_CHARS} for paths.
 * @returns e.g. `"shard\u001b[2J…" (10485760 characters)`.
 */
export function quoteUntrusted(s: string, max: number = QUOTE_CHARS): string {
  const str = typeof s === "string" ? s : String(s);
  const cut = str.length > max;
  const head = cut ? str.slice(0, max) : str;
  return `"${head.replace(UNSAFE, escapeChar)}${cut ? `…" (${str.length} characters)` : '"'}`;
}

/** A character {@link quoteUntrusted} escapes, `\` and `"` aside, or an unpaired surrogate. */
const UNSAFE_IN_PATH = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * A file path for a message: as it is when it is plain (nothing {@link quoteUntrusted} would
 * escape, quotes and backslashes aside, and at most {@link QUOTE_PATH_CHARS} characters), so the
 * usual message reads `/ckpt/global_step10/rank0.zmr: …`; otherwise `quoteUntrusted(path,
 * QUOTE_PATH_CHARS)` (a path built from a hostile name in an index or manifest).
 */
export function pathForMessage(path: string): string {
  const p = typeof path === "string" ? path : String(path);
  return p.length <= QUOTE_PATH_CHARS && !UNSAFE_IN_PATH.test(p) ? p : quoteUntrusted(p, QUOTE_PATH_CHARS);
}
