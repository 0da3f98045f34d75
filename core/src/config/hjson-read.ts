/**
 * Reading a config file written in Hjson, the syntax DeepSpeed itself parses its config with
 * (deepspeed/runtime/config.py: `hjson.load(..., object_pairs_hook=dict_raise_error_on_duplicate_keys)`):
 * JSON plus `#`, `//` and `/* *\/` comments, optional commas and quoteless keys and strings. The
 * parser is the Hjson project's own (npm `hjson`, pinned), run only on text JSON.parse refused and
 * after the text-length bound; what it returns is checked as strictly as JSON input:
 * - a key given twice in one object is refused (DeepSpeed refuses it; hjson-js keeps the last),
 *   found from the key order the parser records with `keepWsc`;
 * - a `__proto__` key is refused (hjson-js assigns keys onto a plain object, where that key would
 *   set the object's prototype instead of a member);
 * - the value is re-serialised and held to the same depth/length/member bounds as JSON text
 *   (json-bounds.ts), then re-parsed, so the result is plain JSON data.
 */
import { ConfigError } from "./errors.ts";
import { QUOTE_MESSAGE_CHARS, quoteUntrusted } from "./quote-untrusted.ts";
import { CONFIG_JSON_LIMITS, describeValue, scanJsonBounds } from "./json-bounds.ts";
import { requireModule } from "@zeromoe/kernels/runtime";

/** The part of the `hjson` package used here (its `parse`, with `keepWsc` recording key order). */
interface HjsonParser {
  parse(text: string, opts: { keepWsc: boolean }): unknown;
}

/** The parser, loaded on first use: only a file JSON.parse refused needs it. */
let hjson: HjsonParser | null = null;
function hjsonParser(): HjsonParser {
  hjson ??= requireModule("hjson", import.meta.url) as HjsonParser;
  return hjson;
}

interface HjsonComments {
  o?: string[];
}

/** First repeated (or `__proto__`) key under `v`: the path of the object holding it, and the key. */
function badKey(v: unknown, path: string, depth: number): { path: string; key: string; why: "twice" | "proto" } | null {
  if (depth > CONFIG_JSON_LIMITS.maxDepth || typeof v !== "object" || v === null) return null;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const hit = badKey(v[i], `${path}[${i}]`, depth + 1);
      if (hit) return hit;
    }
    return null;
  }
  const order = (v as { __COMMENTS__?: HjsonComments }).__COMMENTS__?.o ?? [];
  const seen = new Set<string>();
  for (const k of order) {
    if (k === "__proto__") return { path, key: k, why: "proto" };
    if (seen.has(k)) return { path, key: k, why: "twice" };
    seen.add(k);
  }
  for (const [k, x] of Object.entries(v)) {
    const hit = badKey(x, path === "" ? k : `${path}.${k}`, depth + 1);
    if (hit) return hit;
  }
  return null;
}

/**
 * Parses Hjson `text` (already within {@link CONFIG_JSON_LIMITS}.maxText) into plain JSON data.
 * @returns the value, or `{ error }` with the parser's message (line and column) when it is not Hjson
 * @throws ConfigError naming `source` for a repeated or `__proto__` key, or a value over the bounds
 */
export function parseHjson(text: string, source: string): { value: unknown } | { error: string } {
  let parsed: unknown;
  try {
    parsed = hjsonParser().parse(text, { keepWsc: true });
  } catch (e) {
    if (e instanceof RangeError) return { error: "nested too deeply" };
    // the parser's message quotes the text it stopped at: untrusted, rendered as such
    return { error: quoteUntrusted(e instanceof Error ? e.message : String(e), QUOTE_MESSAGE_CHARS) };
  }
  let json: string;
  try {
    json = JSON.stringify(parsed) ?? "null";
  } catch {
    return { error: "nested too deeply" };
  }
  const over = scanJsonBounds(json, CONFIG_JSON_LIMITS);
  if (over !== null) throw new ConfigError([{ path: over.path, message: over.message, source }], `cannot read ${source}`);
  const bad = badKey(parsed, "", 1);
  if (bad !== null) {
    const path = bad.path === "" ? bad.key : `${bad.path}.${bad.key}`;
    const message = bad.why === "twice" ? `key ${describeValue(bad.key)} is given twice in one object (DeepSpeed refuses duplicate keys; keep one)` : `key "__proto__" is not accepted in a config file`;
    throw new ConfigError([{ path, message, source }], `cannot parse ${source}`);
  }
  return { value: JSON.parse(json) };
}
