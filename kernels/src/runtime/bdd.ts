/**
 * The test API of suites that run under both `bun test` and `deno test` (`@zeromoe/kernels/runtime/bdd`;
 * the plugin suites, plugins/<name>/test): `describe`, `test` / `it`, the hooks `beforeAll`,
 * `afterAll`, `beforeEach`, `afterEach`, and `expect`, with bun:test's signatures (a timeout in ms
 * as the last argument of a test or hook; `test.skip` registers a skipped test).
 *
 * On Bun they are bun:test's own. On Deno: `describe`, `it` and the hooks are `node:test`'s (which
 * `deno test` runs natively: a describe is a test, its tests are steps), and `expect` is Jest's
 * (the `expect` package, pinned in package.json), extended with the bun:test matcher the suites use
 * that Jest lacks (`toStartWith`). The same assertions run on both runtimes; no assertion is
 * dropped on either. (Deno's own @std/testing and @std/expect live on the JSR registry, which this
 * offline install cannot reach.)
 */
import type * as BunTest from "bun:test";
import { RUNTIME } from "./detect.ts";

type Fn = () => unknown;

interface NodeTest {
  describe(name: string, fn: Fn): unknown;
  it(name: string, opts: { timeout?: number; skip?: boolean }, fn: Fn): unknown;
  before(fn: Fn, opts?: { timeout?: number }): void;
  after(fn: Fn, opts?: { timeout?: number }): void;
  beforeEach(fn: Fn, opts?: { timeout?: number }): void;
  afterEach(fn: Fn, opts?: { timeout?: number }): void;
}

interface JestExpect {
  (actual: unknown): unknown;
  extend(matchers: Record<string, (this: unknown, actual: unknown, ...args: unknown[]) => { pass: boolean; message: () => string }>): void;
}

function denoApi(): typeof BunTest {
  const nt = (globalThis as unknown as { process: { getBuiltinModule(id: string): unknown } }).process.getBuiltinModule("node:test") as NodeTest;
  const { createRequire } = (globalThis as unknown as { process: { getBuiltinModule(id: string): unknown } }).process.getBuiltinModule("node:module") as typeof import("node:module");
  const jest = (createRequire(import.meta.url)("expect") as { expect: JestExpect }).expect;
  jest.extend({
    toStartWith(actual, prefix) {
      const pass = typeof actual === "string" && typeof prefix === "string" && actual.startsWith(prefix);
      return { pass, message: () => `expected ${JSON.stringify(actual)} ${pass ? "not " : ""}to start with ${JSON.stringify(prefix)}` };
    },
    toEndWith(actual, suffix) {
      const pass = typeof actual === "string" && typeof suffix === "string" && actual.endsWith(suffix);
      return { pass, message: () => `expected ${JSON.stringify(actual)} ${pass ? "not " : ""}to end with ${JSON.stringify(suffix)}` };
    },
  });
  const timeout = (t: unknown): { timeout?: number } => (typeof t === "number" ? { timeout: t } : typeof t === "object" && t !== null && "timeout" in t ? { timeout: (t as { timeout: number }).timeout } : {});
  const test = Object.assign((name: string, fn: Fn, t?: unknown): void => void nt.it(name, timeout(t), fn), {
    skip: (name: string, fn: Fn, t?: unknown): void => void nt.it(name, { ...timeout(t), skip: true }, fn),
  });
  const hook = (h: (fn: Fn, opts?: { timeout?: number }) => void) => (fn: Fn, t?: unknown): void => h(fn, timeout(t));
  return {
    describe: (name: string, fn: Fn) => void nt.describe(name, fn),
    test,
    it: test,
    beforeAll: hook(nt.before),
    afterAll: hook(nt.after),
    beforeEach: hook(nt.beforeEach),
    afterEach: hook(nt.afterEach),
    expect: withMessage(jest),
  } as unknown as typeof BunTest;
}

/** bun:test's `expect(actual, message)`: Jest's expect takes one argument, so with a message the
 * matchers (also under .not, .resolves, .rejects) are wrapped to put it before a failure's text. */
function withMessage(jest: JestExpect): JestExpect {
  const wrap = (target: object, message: string): object =>
    new Proxy(target, {
      get(t, key, receiver) {
        const v = Reflect.get(t, key, receiver) as unknown;
        if (typeof v === "function") {
          return (...args: unknown[]) => {
            const fail = (e: unknown): never => {
              if (e instanceof Error) e.message = `${message}\n${e.message}`;
              throw e;
            };
            try {
              const r = (v as (...a: unknown[]) => unknown).apply(t, args);
              return r instanceof Promise ? r.catch(fail) : r;
            } catch (e) {
              return fail(e);
            }
          };
        }
        return typeof v === "object" && v !== null ? wrap(v, message) : v;
      },
    });
  const e = ((actual: unknown, message?: unknown) => {
    const m = jest(actual) as object;
    return message === undefined ? m : wrap(m, String(message));
  }) as JestExpect;
  return Object.assign(e, jest);
}

const api: typeof BunTest = RUNTIME === "bun" ? (import.meta.require("bun:test") as typeof BunTest) : denoApi();

/** A group of tests (bun:test describe). */
export const describe: typeof BunTest.describe = api.describe;
/** One test: `test(name, fn, timeoutMs?)`. */
export const test: typeof BunTest.test = api.test;
/** Same as {@link test}. */
export const it: typeof BunTest.it = api.it;
/** Runs once before the tests of the file or describe it is declared in. */
export const beforeAll: typeof BunTest.beforeAll = api.beforeAll;
/** Runs once after them. */
export const afterAll: typeof BunTest.afterAll = api.afterAll;
/** Runs before each test. */
export const beforeEach: typeof BunTest.beforeEach = api.beforeEach;
/** Runs after each test. */
export const afterEach: typeof BunTest.afterEach = api.afterEach;
/** Assertions (bun:test's expect on Bun, Jest's on Deno). */
export const expect: typeof BunTest.expect = api.expect;
