/**
 * docs/plugins.md's walkthrough is runnable as written: its test snippet is the whole test file the
 * repository runs out of tree (core/test/out-of-tree/grad-count/test/grad-count.test.ts; it was a
 * fragment before), and its package.json needs no path edited by hand (it had /home/me).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";

const doc = readFileSync(new URL("../../docs/plugins.md", import.meta.url), "utf8");

describe("docs/plugins.md walkthrough", () => {
  test("the test snippet is the whole out-of-tree test file; no hand-edited paths", () => {
    const file = readFileSync(new URL("./out-of-tree/grad-count/test/grad-count.test.ts", import.meta.url), "utf8");
    expect(doc).toContain("```ts\n" + file + "```\n");
    expect(doc).not.toContain("/home/me");
  });
});
