/**
 * Locates the first syntax error of a JSON text (RFC 8259 grammar) as line and column, because
 * Bun's `JSON.parse` errors carry no position. A small recursive-descent scanner; it only
 * validates, it builds nothing.
 */
import { quoteUntrusted } from "./quote-untrusted.ts";

/** Where and what the first syntax error is. Lines and columns are 1-based. */
export interface JsonSyntaxError {
  offset: number;
  line: number;
  column: number;
  message: string;
}

class Scan {
  i = 0;
  constructor(readonly s: string) {}
  fail(message: string): never {
    throw Object.assign(new Error(message), { offset: this.i });
  }
  ws(): void {
    while (this.i < this.s.length && " \t\n\r".includes(this.s[this.i])) this.i++;
  }
  value(depth: number): void {
    if (depth > 10000) this.fail("nesting too deep");
    this.ws();
    const c = this.s[this.i];
    if (c === "{") return this.object(depth);
    if (c === "[") return this.array(depth);
    if (c === '"') return this.string();
    if (c === "-" || (c >= "0" && c <= "9")) return this.number();
    for (const lit of ["true", "false", "null"]) {
      if (this.s.startsWith(lit, this.i)) {
        this.i += lit.length;
        return;
      }
    }
    this.fail(c === undefined ? "unexpected end of input, expected a value" : `unexpected ${quoteUntrusted(c)}, expected a value`);
  }
  object(depth: number): void {
    this.members("}", "an object", () => {
      this.ws();
      if (this.s[this.i] !== '"') this.fail(`expected a string key, got ${this.got()}`);
      this.string();
      this.ws();
      if (this.s[this.i] !== ":") this.fail(`expected ':' after a key, got ${this.got()}`);
      this.i++;
      this.value(depth + 1);
    });
  }
  array(depth: number): void {
    this.members("]", "an array", () => this.value(depth + 1));
  }
  /** The body of an object or array, the opening bracket at `i`: `member` scans one member;
   * members are separated by ',' and the list ends at `close`. */
  members(close: "}" | "]", what: string, member: () => void): void {
    this.i++;
    this.ws();
    if (this.s[this.i] === close) {
      this.i++;
      return;
    }
    for (;;) {
      member();
      this.ws();
      const c = this.s[this.i];
      if (c === close) {
        this.i++;
        return;
      }
      if (c !== ",") this.fail(`expected ',' or '${close}' in ${what}, got ${this.got()}`);
      this.i++;
    }
  }
  string(): void {
    this.i++;
    for (;;) {
      const c = this.s[this.i];
      if (c === undefined) this.fail("unterminated string");
      if (c === '"') {
        this.i++;
        return;
      }
      if (c < " ") this.fail("control character in a string (escape it)");
      if (c === "\\") {
        const e = this.s[this.i + 1];
        if (e === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(this.s.slice(this.i + 2, this.i + 6))) this.fail("bad \\u escape");
          this.i += 6;
          continue;
        }
        if (e === undefined || !'"\\/bfnrt'.includes(e)) this.fail(`bad escape \\${e ?? ""}`);
        this.i += 2;
        continue;
      }
      this.i++;
    }
  }
  number(): void {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(this.s.slice(this.i, this.i + 400));
    if (!m) this.fail("malformed number");
    this.i += m[0].length;
  }
  got(): string {
    const c = this.s[this.i];
    return c === undefined ? "end of input" : quoteUntrusted(c);
  }
}

/** The first syntax error of `text`, or null if it is valid JSON. */
export function findJsonSyntaxError(text: string): JsonSyntaxError | null {
  const sc = new Scan(text);
  try {
    sc.value(0);
    sc.ws();
    if (sc.i < text.length) sc.fail(`unexpected ${quoteUntrusted(text[sc.i]!)} after the JSON value`);
    return null;
  } catch (e) {
    const offset = (e as { offset?: number }).offset ?? sc.i;
    const before = text.slice(0, offset);
    const line = before.split("\n").length;
    const column = offset - (before.lastIndexOf("\n") + 1) + 1;
    return { offset, line, column, message: (e as Error).message };
  }
}
