/**
 * Job-config and DeepSpeed-config keys named like Object.prototype members are plain keys (issue
 * 32: a DeepSpeed `optimizer.type` of `{"toString": 1}` died with `TypeError: No default value` in
 * config/resolve.ts, where String() of the object called its non-function toString). Every path of
 * the job spec, in the job file, the DeepSpeed file and the command-line overrides, gets each
 * prototype name as a value, as a key of an object value, and as a sibling key; every case ends in
 * a ConfigError (or success), never another error.
 */
import { expect, test } from "bun:test";
import { ConfigError } from "../src/config/errors.ts";
import { parseJsonConfig, resolveJobConfig } from "../src/config/resolve.ts";
import { JOB_SPEC } from "../src/config/spec-job.ts";

const NAMES = ["constructor", "toString", "__proto__", "hasOwnProperty", "valueOf", "isPrototypeOf", "toLocaleString", "__defineGetter__"];

function specPaths(spec: { fields?: Record<string, unknown> }, prefix: string, out: string[]): string[] {
  for (const [k, f] of Object.entries(spec.fields ?? {})) {
    const p = prefix === "" ? k : `${prefix}.${k}`;
    out.push(p);
    if ((f as { fields?: unknown }).fields) specPaths(f as { fields?: Record<string, unknown> }, p, out);
  }
  return out;
}

/** JSON text with `valueJson` at dotted `path` (built as text: "__proto__" stays a plain key). */
function at(path: string, valueJson: string): string {
  return path.split(".").reduceRight((inner, k) => `{${JSON.stringify(k)}: ${inner}}`, valueJson);
}

test("prototype names as values, keys and nested keys: ConfigError or success, nothing else", () => {
  const paths = [...specPaths(JOB_SPEC as never, "", []), "optimizer.type", "scheduler.type", "optimizer.params.lr", "zero_optimization.offload_optimizer.device"];
  const values = (name: string) => [JSON.stringify(name), `{${JSON.stringify(name)}: 1}`, `{"toString": 1, "valueOf": 1, ${JSON.stringify(name)}: {"a": 1}}`, `[{${JSON.stringify(name)}: 1}]`];
  const failures: string[] = [];
  let cases = 0;
  const run = (what: string, f: () => unknown) => {
    cases++;
    try {
      f();
    } catch (e) {
      if (!(e instanceof ConfigError)) failures.push(`${what}: ${(e as Error).name}: ${(e as Error).message.slice(0, 120)}`);
    }
  };
  for (const p of paths)
    for (const name of NAMES)
      for (const v of values(name)) {
        const text = at(p, v);
        run(`job ${text}`, () => resolveJobConfig(parseJsonConfig(text, "job.json")));
        run(`ds ${text}`, () => resolveJobConfig({ optimizer: { type: "adam", params: { lr: 1e-3 } } }, { deepspeed: { raw: parseJsonConfig(text, "ds.json"), source: "ds.json" } }));
        run(`ov ${text}`, () => resolveJobConfig({}, { overrides: parseJsonConfig(text, "overrides") as Record<string, unknown> }));
        const sibling = at(p.split(".").slice(0, -1).concat(name).join("."), "1");
        run(`job sibling ${sibling}`, () => resolveJobConfig(parseJsonConfig(sibling, "job.json")));
      }
  expect(cases).toBeGreaterThan(10_000);
  expect(failures.slice(0, 10)).toEqual([]);
}, 300_000);

test("a prototype-named key is reported as an unknown key by its name", () => {
  for (const name of NAMES) {
    let e: unknown;
    try {
      resolveJobConfig(parseJsonConfig(`{"data": {${JSON.stringify(name)}: 1}}`, "job.json"));
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as Error).message).toContain(`data.${name}: unknown key`);
  }
});
