/**
 * The dual-runtime test API (kernels/src/runtime/bdd.ts) behaves the same under `bun test` and
 * `deno test`: hooks run in order, passing matchers pass, failing ones throw (with bun:test's
 * custom message first where one is given), on the matchers the plugin suites use.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { RUNTIME } from "@zeromoe/kernels/runtime";

const order: string[] = [];
beforeAll(() => {
  order.push("beforeAll");
});
afterAll(() => {
  order.push("afterAll");
});

/** The message of what `f` throws, or null when it does not throw. */
function thrown(f: () => unknown): string | null {
  try {
    f();
    return null;
  } catch (e) {
    return String((e as Error).message ?? e);
  }
}

describe(`dual-runtime test API on ${RUNTIME}`, () => {
  let eachCount = 0;
  beforeEach(() => {
    eachCount++;
  });

  test("beforeAll ran first, beforeEach before each test", () => {
    expect(order).toEqual(["beforeAll"]);
    expect(eachCount).toBe(1);
  });

  test("a second test sees beforeEach again", () => {
    expect(eachCount).toBe(2);
  });

  test("passing matchers pass", () => {
    expect(1 + 1).toBe(2);
    expect({ a: [1, 2], b: new Float32Array([0.5, 1.5]) }).toEqual({ a: [1, 2], b: new Float32Array([0.5, 1.5]) });
    expect(0.1 + 0.2).toBeCloseTo(0.3, 10);
    expect(3).toBeGreaterThan(2);
    expect(2).toBeLessThanOrEqual(2);
    expect("zero3 gather").toContain("gather");
    expect("zero3 gather").toMatch(/^zero\d/);
    expect("zero3 gather").toStartWith("zero3");
    expect([1, 2, 3]).not.toContain(4);
    expect({ code: 0, out: "x" }).toMatchObject({ code: 0 });
    expect(null).toBeNull();
    expect(() => {
      throw new Error("bad key stage");
    }).toThrow("stage");
    expect(["a", "bc"]).toEqual(expect.arrayContaining(["bc"]));
  });

  test("failing matchers throw, also negated and on typed arrays", () => {
    expect(thrown(() => expect(1).toBe(2))).not.toBeNull();
    expect(thrown(() => expect(new Float32Array([1, 2])).toEqual(new Float32Array([1, 3])))).not.toBeNull();
    expect(thrown(() => expect(0.1).toBeCloseTo(0.2, 5))).not.toBeNull();
    expect(thrown(() => expect("abc").toStartWith("b"))).not.toBeNull();
    expect(thrown(() => expect([1]).not.toContain(1))).not.toBeNull();
    expect(thrown(() => expect(() => {}).toThrow())).not.toBeNull();
    expect(thrown(() => expect(2).toBeLessThan(1))).not.toBeNull();
  });

  test("a custom message is part of the failure", () => {
    expect(thrown(() => expect(4, "exit code of the child").toBe(0))).toContain("exit code of the child");
    expect(thrown(() => expect(4, "unused").toBe(4))).toBeNull();
  });

  test("async matchers", async () => {
    await expect(Promise.resolve(5)).resolves.toBe(5);
    await expect(Promise.reject(new Error("no device"))).rejects.toThrow("no device");
    let failed = false;
    try {
      await expect(Promise.resolve(5)).resolves.toBe(6);
    } catch {
      failed = true;
    }
    expect(failed).toBe(true);
  });
});
