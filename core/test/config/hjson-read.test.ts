/**
 * Job and DeepSpeed files in Hjson, as DeepSpeed reads them (hjson.load): comments and optional
 * commas are read; a repeated key, a `__proto__` key and a value over the JSON bounds are refused
 * as for JSON text; a text that is neither names the JSON position and the Hjson parser's message.
 */
import { describe, expect, test } from "bun:test";
import { ConfigError, parseJsonConfig } from "../../src/config/index.ts";

const read = (t: string) => parseJsonConfig(t, "ds.json", { hjson: true });
function message(t: string): string {
  try {
    read(t);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error("accepted");
}

describe("Hjson config files", () => {
  test("// # and /* */ comments, trailing commas and quoteless keys read as DeepSpeed reads them", () => {
    const text = `{
  // ZeRO-3 for the 8B model
  "zero_optimization": {
    "stage": 3, # partition parameters too
    /* the bucket sizes DeepSpeed fills */ "reduce_bucket_size": 5e8,
  },
  gradient_clipping: 1.0
  "note": "a // inside a string stays # as is"
}`;
    expect(read(text)).toEqual({ zero_optimization: { stage: 3, reduce_bucket_size: 5e8 }, gradient_clipping: 1.0, note: "a // inside a string stays # as is" });
    // the result is plain data (no parser bookkeeping)
    const v = read(text) as Record<string, unknown>;
    expect(Object.getOwnPropertyNames(v.zero_optimization)).toEqual(["stage", "reduce_bucket_size"]);
    expect(JSON.stringify(v)).not.toContain("__COMMENTS__");
  });

  test("a repeated key is refused (DeepSpeed's dict_raise_error_on_duplicate_keys), at any depth", () => {
    expect(message('{\n  // c\n  "a": 1,\n  "a": 2\n}')).toContain('a: key "a" is given twice in one object');
    expect(message('{ "z": { stage: 1 # c\n stage: 2 } }')).toContain('z.stage: key "stage" is given twice');
    expect(message('{ "l": [ {"k": 1, "k": 2} ] // c\n}')).toContain("l[0].k: key");
  });

  test("__proto__ is refused instead of setting a prototype", () => {
    expect(message('{ // c\n "__proto__": { "polluted": true } }')).toContain('key "__proto__" is not accepted');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  test("bounds hold: depth over the limit and deep nesting that would overflow the parser are refused", () => {
    expect(message("// c\n" + "[".repeat(40) + "]".repeat(40))).toMatch(/nest|depth/i);
    expect(message("// c\n" + "[".repeat(200_000))).toMatch(/nest|depth|not valid JSON/i);
  });

  test("neither JSON nor Hjson: the JSON position and the Hjson parser's message", () => {
    const m = message('{\n  // c\n  "a": [1, 2\n}');
    expect(m).toContain("not valid JSON at line");
    expect(m).toContain("nor Hjson, DeepSpeed's config syntax:");
  });

  test("without the option (Hugging Face config.json) comments stay refused", () => {
    expect(() => parseJsonConfig('{ // c\n "a": 1 }', "config.json")).toThrow(/not valid JSON at line 1/);
  });
});
