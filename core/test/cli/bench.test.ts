/**
 * The `bench` dispatcher (core/src/cli/bench.ts): discovery of `<package>/bench/<name>.ts` in
 * kernels, core and every plugin, first folder wins, helpers (`_x.ts`, subfolders) are not
 * benchmarks, `main(args)` receives the arguments, and unknown names / missing `main` are errors
 * that name the file or the available benchmarks. Uses a throw-away repository layout in a temp dir.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchDirs, listBenches, runBench } from "../../src/cli/bench.ts";

const root = mkdtempSync(join(tmpdir(), "zeromoe-bench-"));
const out = join(root, "calls.json");
function bench(dir: string, name: string, body: string): void {
  mkdirSync(join(root, dir), { recursive: true });
  writeFileSync(join(root, dir, name), body);
}
const recorder = (tag: string) =>
  `import { appendFileSync } from "node:fs";\nexport function main(args: string[]) { appendFileSync(${JSON.stringify(out)}, JSON.stringify({ tag: ${JSON.stringify(tag)}, args }) + "\\n"); }\n`;
bench("kernels/bench", "alpha.ts", recorder("kernels-alpha"));
bench("kernels/bench", "_helper.ts", recorder("helper"));
bench("kernels/bench/support", "inner.ts", recorder("inner"));
bench("core/bench", "alpha.ts", recorder("core-alpha"));
bench("core/bench", "beta.ts", recorder("core-beta"));
bench("plugins/zero3/bench", "gamma.ts", recorder("zero3-gamma"));
bench("plugins/moe/bench", "nomain.ts", "export const x = 1;\n");
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("bench dispatcher", () => {
  test("finds benchmarks in kernels, core and plugins; first folder wins; helpers are skipped", () => {
    expect(benchDirs(root).map((d) => d.slice(root.length + 1))).toEqual(["kernels/bench", "core/bench", "plugins/moe/bench", "plugins/zero3/bench"]);
    const list = listBenches(root);
    expect([...list.keys()].sort()).toEqual(["alpha", "beta", "gamma", "nomain"]);
    expect(list.get("alpha")).toBe(join(root, "kernels/bench/alpha.ts"));
  });
  test("runs main(args) of the named benchmark", async () => {
    await runBench("gamma", ["--sizes", "7,11"], root);
    await runBench("alpha", [], root);
    const calls = (await Bun.file(out).text()).trim().split("\n").map((l) => JSON.parse(l));
    expect(calls).toEqual([{ tag: "zero3-gamma", args: ["--sizes", "7,11"] }, { tag: "kernels-alpha", args: [] }]);
  });
  test("unknown names and modules without main are errors naming what is available / the file", async () => {
    await expect(runBench("delta", [], root)).rejects.toThrow(/unknown benchmark "delta". Available: alpha, beta, nomain, gamma/);
    await expect(runBench("nomain", [], root)).rejects.toThrow(/nomain\.ts must export a function main/);
  });
});
