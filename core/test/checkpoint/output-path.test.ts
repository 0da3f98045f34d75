/**
 * Writing a safetensors file to a path that cannot take it.
 *
 * Regressions: `bun run zero-to-fp32 ckpt /missing-dir/model.safetensors` printed an ENOENT stack
 * trace and exited 1, and `bun run zero-to-fp32 ckpt /tmp` (a directory) left a complete temporary
 * file (`/.tmp.tmp-<pid>-<random>`) behind after the final rename failed. Now the CLI rejects such
 * paths up front (exit status 2, usage error) and `SafetensorsWriter.finish` removes its temporary
 * file when the rename fails.
 */
import { afterAll, describe, expect, spyOn, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SafetensorsWriter } from "../../src/checkpoint/safetensors.ts";
import { main } from "../../src/cli/zero-to-fp32.ts";

const root = mkdtempSync(join(tmpdir(), "zeromoe-outpath-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Run the CLI's main with console.error captured; returns [status, stderr text]. */
function runCli(argv: string[]): [number, string] {
  const lines: string[] = [];
  const spy = spyOn(console, "error").mockImplementation((...a: unknown[]) => {
    lines.push(a.map(String).join(" "));
  });
  try {
    return [main(argv), lines.join("\n")];
  } finally {
    spy.mockRestore();
  }
}

describe("zero-to-fp32 output path", () => {
  test("a missing output directory is a usage error naming it (status 2, no stack trace)", () => {
    const out = join(root, "no-such-dir", "model.safetensors");
    const [status, err] = runCli([join(root, "ckpt"), out]);
    expect(status).toBe(2);
    expect(err).toContain(`directory ${join(root, "no-such-dir")} does not exist`);
    expect(err).not.toContain("    at ");
  });

  test("an output path that is a directory, or under a file, is a usage error", () => {
    const dir = join(root, "a-dir");
    mkdirSync(dir);
    const [s1, e1] = runCli([join(root, "ckpt"), dir]);
    expect(s1).toBe(2);
    expect(e1).toContain("is a directory; expected a file path");
    const file = join(root, "a-file");
    writeFileSync(file, "x");
    const [s2, e2] = runCli([join(root, "ckpt"), join(file, "model.safetensors")]);
    expect(s2).toBe(2);
    expect(e2).toContain(`${file} is not a directory`);
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe("SafetensorsWriter.finish", () => {
  test("a failed rename (the final path is a directory) removes the temporary file", () => {
    const parent = join(root, "parent");
    mkdirSync(parent);
    const target = join(parent, "taken");
    mkdirSync(join(target, "inner"), { recursive: true }); // a non-empty directory: rename fails
    const data = Float32Array.from({ length: 7 }, (_, i) => Math.sin(i + 0.5));
    const w = SafetensorsWriter.create(target, [{ name: "w", dtype: "F32", shape: [7] }]);
    expect(readdirSync(parent).length).toBe(2); // the directory and the temporary file
    w.writeTensor("w", data);
    expect(() => w.finish()).toThrow();
    expect(readdirSync(parent)).toEqual(["taken"]);
  });
});
