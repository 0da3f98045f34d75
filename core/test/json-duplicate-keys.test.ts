/**
 * Repeated keys in JSON we read (config/json-duplicate-keys.ts). DeepSpeed loads its config with
 * `object_pairs_hook=dict_raise_error_on_duplicate_keys` and stops with "Duplicate keys in DeepSpeed
 * config"; `JSON.parse` silently kept the last value, so `{"train_micro_batch_size_per_gpu": 1,
 * "train_micro_batch_size_per_gpu": 2}` trained with 2 (task P, 2026-12-02). Job files, DeepSpeed
 * files and config.json now refuse a repeated key naming its path, as DeepSpeed does.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ConfigError } from "../src/config/errors.ts";
import { findDuplicateJsonKey } from "../src/config/json-duplicate-keys.ts";
import { parseJsonConfig } from "../src/config/resolve.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-dupkeys-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const TRAIN = resolve(import.meta.dir, "../src/cli/train.ts");

describe("findDuplicateJsonKey", () => {
  test("distinct keys, also equal keys in sibling and nested objects and in arrays of objects", () => {
    for (const t of [`{}`, `[]`, `1`, `"a"`, `{"a":1,"b":2}`, `{"a":{"a":1},"b":{"a":2}}`, `[{"a":1},{"a":2}]`, `{"a":[{"x":1,"y":2},{"x":3}],"x":4}`, `{"a":"\\"a\\"","\\"a\\"":1}`]) {
      expect(findDuplicateJsonKey(t), t).toBeNull();
    }
  });

  test("top level, nested (with the path), escaped spelling, after strings holding braces and commas", () => {
    expect(findDuplicateJsonKey(`{"a":1,"a":2}`)).toEqual({ path: "", key: "a" });
    expect(findDuplicateJsonKey(`{"x":{"s":"{,}\\"","b":1,"b":2}}`)).toEqual({ path: "x", key: "b" });
    expect(findDuplicateJsonKey(`{"l":[0,{"k":1},{"k":1,"\\u006b":2}]}`)).toEqual({ path: "l[2]", key: "k" });
    expect(findDuplicateJsonKey(`{"odd key":{"z":1,"z":1}}`)).toEqual({ path: `["odd key"]`, key: "z" });
  });

  test("random documents: equals a reference built on Map", () => {
    // reference: walk a token list we generate ourselves, tracking keys per object with a Map
    let seed = 12345;
    const rnd = (n: number) => {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      return (seed >>> 8) % n;
    };
    const keys = ["a", "b", "c", "\\u0061", "d\\\"", "{", ","];
    const decoded = (k: string) => JSON.parse(`"${k}"`) as string;
    let withDuplicates = 0;
    for (let trial = 0; trial < 500; trial++) {
      let dupFound: { path: string; key: string } | null = null;
      const gen = (depth: number, path: string): string => {
        if (depth > 3 || rnd(3) === 0) return rnd(2) ? `"s{,}"` : String(rnd(100));
        if (rnd(2)) {
          const n = rnd(4);
          const parts: string[] = [];
          for (let i = 0; i < n; i++) parts.push(gen(depth + 1, `${path}[${i}]`));
          return `[${parts.join(",")}]`;
        }
        const n = rnd(4);
        const seen = new Map<string, true>();
        const parts: string[] = [];
        for (let i = 0; i < n; i++) {
          const k = keys[rnd(keys.length)]!;
          const d = decoded(k);
          if (seen.has(d) && dupFound === null) dupFound = { path, key: d };
          seen.set(d, true);
          const childPath = /^[A-Za-z_][A-Za-z0-9_]*$/.test(d) ? (path === "" ? d : `${path}.${d}`) : `${path}[${JSON.stringify(d)}]`;
          parts.push(`"${k}":${gen(depth + 1, childPath)}`);
        }
        return `{${parts.join(",")}}`;
      };
      dupFound = null;
      const text = gen(0, "");
      JSON.parse(text);
      const got = findDuplicateJsonKey(text);
      // the reference records the first duplicate in generation (document) order, as the scan does
      expect(got, text).toEqual(dupFound);
      if (got !== null) withDuplicates++;
    }
    expect(withDuplicates).toBeGreaterThan(50);
    expect(withDuplicates).toBeLessThan(450);
  });
});

describe("job, DeepSpeed and config.json files refuse a repeated key", () => {
  test("parseJsonConfig names the key path and the file", () => {
    let e: unknown;
    try {
      parseJsonConfig(`{"zero_optimization": {"stage": 1, "stage": 3}}`, "ds.json");
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(ConfigError);
    const ce = e as ConfigError;
    expect(ce.issues[0]!.path).toBe("zero_optimization.stage");
    expect(ce.issues[0]!.source).toBe("ds.json");
    expect(ce.issues[0]!.message).toContain("given twice");
  });

  test("bun run train --deepspeed with a repeated key exits 2 naming it (DeepSpeed: 'Duplicate keys in DeepSpeed config')", () => {
    const ds = join(ROOT, "ds.json");
    writeFileSync(ds, `{"train_micro_batch_size_per_gpu": 1, "train_micro_batch_size_per_gpu": 2}`);
    const r = Bun.spawnSync(["bun", TRAIN, "--deepspeed", ds, "--steps", "1", "--backend", "cpu"], { env: { ...process.env, CI: "1" } });
    const err = r.stderr.toString();
    expect(r.exitCode, err).toBe(2);
    expect(err).toContain("train_micro_batch_size_per_gpu");
    expect(err).toContain("given twice");
    expect(err).toContain(ds);
    expect(err).not.toMatch(/^\s+at /m);
  });
});
