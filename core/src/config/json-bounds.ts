/**
 * Bounds on untrusted JSON text, checked BEFORE `JSON.parse` builds anything: nesting depth, the
 * length of every string and key, the number of members of every object/array, and the text length.
 * The scan is iterative (an explicit stack bounded by the depth limit), linear in the text, and
 * allocates nothing proportional to the input except the (bounded) path of the first violation.
 *
 * Every later consumer of the parsed value (recursive merges, `show()` in messages, "did you mean"
 * over key names) is bounded by the same limits, so a hostile file cannot make the program recurse,
 * loop or allocate without bound (issue 18: a 100,000-deep array overflowed the stack of a
 * recursive consumer; a 10 MB key took 17.9 s of edit distance before being rejected).
 *
 * The scan does not validate JSON syntax (JSON.parse does that afterwards, and json-position.ts
 * locates its errors); it only counts, and it stays correct on malformed text (it never reads past
 * the end, and an unterminated string just ends the scan).
 */

import { QUOTE_CHARS, quoteUntrusted } from "./quote-untrusted.ts";

/** Limits of {@link scanJsonBounds}. */
export interface JsonLimits {
  /** Deepest nesting of objects/arrays (the top-level value is depth 1). */
  maxDepth: number;
  /** Longest string value, in UTF-16 code units of the raw text (escapes count as written). */
  maxString: number;
  /** Longest object key (same units). */
  maxKey: number;
  /** Most members of one object or array. */
  maxMembers: number;
  /** Longest text, in UTF-16 code units. */
  maxText: number;
}

/** Limits for job files, DeepSpeed configs and command-line JSON: generous for any real config. */
export const CONFIG_JSON_LIMITS: Readonly<JsonLimits> = { maxDepth: 32, maxString: 16384, maxKey: 256, maxMembers: 100_000, maxText: 16 << 20 };

/** The first limit a text exceeds: where (a JSON path like `a.b[3]`, bounded) and what. */
export interface JsonBoundsViolation {
  /** JSON path of the offending value or key ("" = the root), at most ~200 characters. */
  path: string;
  /** Character offset in the text. */
  offset: number;
  message: string;
}

/** Longest path reported (characters); deeper paths are cut with "…". */
const MAX_PATH_CHARS = 200;
/** Characters of an offending key or string echoed in a message (quote-untrusted.ts). */
export const ECHO_CHARS = QUOTE_CHARS;

interface Frame {
  array: boolean;
  /** Members seen so far. */
  n: number;
  /** Current key (objects, raw text, at most maxKey characters) or index (arrays). */
  key: string;
}

function pathOf(stack: readonly Frame[]): string {
  let p = "";
  for (const f of stack) {
    if (f.n === 0 && f.key === "") break;
    const seg = f.array ? `[${f.n - 1}]` : /^[A-Za-z_][A-Za-z0-9_]*$/.test(f.key) ? (p === "" ? f.key : `.${f.key}`) : `[${quoteUntrusted(f.key)}]`;
    if (p.length + seg.length > MAX_PATH_CHARS) return p + "…";
    p += seg;
  }
  return p;
}

/**
 * Scan `text` against `limits` (see the module comment).
 * @returns the first violation, or null when every bound holds.
 */
export function scanJsonBounds(text: string, limits: Readonly<JsonLimits>): JsonBoundsViolation | null {
  if (text.length > limits.maxText) return { path: "", offset: 0, message: `text of ${text.length} characters is over the ${limits.maxText}-character limit` };
  const stack: Frame[] = [];
  const len = text.length;
  let expectKey = false;
  for (let i = 0; i < len; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i + 1;
      let j = start;
      while (j < len) {
        const d = text.charCodeAt(j);
        if (d === 0x5c /* \ */) j += 2;
        else if (d === 0x22) break;
        else j++;
      }
      const n = Math.min(j, len) - start;
      const top = stack[stack.length - 1];
      const isKey = top !== undefined && !top.array && expectKey;
      if (isKey) {
        // the path of the object that holds the key (its frame's key is still the previous member's)
        if (n > limits.maxKey) return { path: pathOf(stack.slice(0, -1)), offset: start, message: `key ${quoteUntrusted(text.slice(start, start + n))} is longer than the ${limits.maxKey}-character limit` };
        top.key = text.slice(start, start + n);
        top.n++;
        if (top.n > limits.maxMembers) return { path: pathOf(stack), offset: start, message: `object has more than ${limits.maxMembers} members` };
        expectKey = false;
      } else if (n > limits.maxString) {
        return { path: pathOf(stack), offset: start, message: `string of ${n} characters is longer than the ${limits.maxString}-character limit` };
      }
      i = j;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const top = stack[stack.length - 1];
      if (top?.array) {
        top.n++;
        if (top.n > limits.maxMembers) return { path: pathOf(stack), offset: i, message: `array has more than ${limits.maxMembers} elements` };
      }
      if (stack.length + 1 > limits.maxDepth) return { path: pathOf(stack), offset: i, message: `nesting deeper than ${limits.maxDepth} levels` };
      stack.push({ array: c === 0x5b, n: 0, key: "" });
      expectKey = c === 0x7b;
      continue;
    }
    if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      expectKey = false;
      continue;
    }
    if (c === 0x2c /* , */) {
      const top = stack[stack.length - 1];
      expectKey = top !== undefined && !top.array;
      continue;
    }
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09 || c === 0x3a /* : */) continue;
    // a scalar (number, literal or junk): an array element starts here
    const top = stack[stack.length - 1];
    if (top?.array) {
      top.n++;
      if (top.n > limits.maxMembers) return { path: pathOf(stack), offset: i, message: `array has more than ${limits.maxMembers} elements` };
    }
    while (i + 1 < len) {
      const d = text.charCodeAt(i + 1);
      if (d === 0x2c || d === 0x5d || d === 0x7d || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09 || d === 0x22 || d === 0x5b || d === 0x7b || d === 0x3a) break;
      i++;
    }
  }
  return null;
}

/** Decimal digits of `v`, cut like a quoted string (a BigInt is digits and a sign: nothing to escape). */
function bigintText(v: bigint): string {
  const t = v.toString();
  return t.length <= ECHO_CHARS ? t : `${t.slice(0, ECHO_CHARS)}… (${t.length} characters)`;
}

/**
 * A short, bounded rendering of any parsed value for an error message: never recurses more than
 * two levels, never serialises more than ~{@link ECHO_CHARS}×2 characters, handles BigInt, cycles,
 * typed arrays and non-JSON values (used instead of `JSON.stringify` on untrusted data).
 */
export function describeValue(v: unknown, depth = 0): string {
  switch (typeof v) {
    case "string":
      // quote-untrusted.ts: bounded, control characters escaped (\n, \u001b…), so a hostile value
      // cannot break the one-line message or send terminal escape sequences
      return quoteUntrusted(v);
    case "number":
    case "boolean":
      return String(v);
    case "bigint":
      return `${bigintText(v)}n`;
    case "undefined":
      return "nothing";
    case "function":
    case "symbol":
      return typeof v;
  }
  if (v === null) return "null";
  if (ArrayBuffer.isView(v)) return `${v.constructor.name}(${v.byteLength} bytes)`;
  if (Array.isArray(v)) {
    if (depth >= 1) return `[…${v.length} items]`;
    const parts = v.slice(0, 8).map((x) => describeValue(x, depth + 1));
    return `[${parts.join(",")}${v.length > 8 ? `,… (${v.length} items)` : ""}]`;
  }
  if (v instanceof Map) return `Map(${v.size})`;
  if (typeof v === "object") {
    let keys: string[];
    try {
      keys = Object.keys(v as object);
    } catch {
      return "object";
    }
    if (depth >= 1) return `{…${keys.length} keys}`;
    const parts = keys.slice(0, 4).map((k) => `${quoteUntrusted(k, 24)}: ${describeValue((v as Record<string, unknown>)[k], depth + 1)}`);
    return `{${parts.join(", ")}${keys.length > 4 ? `, … (${keys.length} keys)` : ""}}`;
  }
  return String(v);
}
