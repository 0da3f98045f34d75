/**
 * "file not found" for a relative job or dataset path names the absolute path that was tried.
 *
 * Regression: `cd examples && bun run train --config zero3.json` said only "file not found:
 * zero3.json" — `bun run` runs scripts in the repository root, so the file next to the user was
 * looked for elsewhere and the message did not say where.
 */
import { describe, expect, test } from "bun:test";
import { join, resolve } from "node:path";
import { loadJobConfig } from "../src/config/load.ts";
import { ByteTokenizer, loadCorpus } from "../src/data/index.ts";

describe("not-found messages of relative paths", () => {
  test("a relative job file: the message names the resolved path", async () => {
    const rel = join("no-such-folder-7919", "job.json");
    await expect(loadJobConfig({ configPath: rel })).rejects.toThrow(`file not found: ${rel} (looked for ${resolve(rel)};`);
  });

  test("an absolute job file: the path alone", async () => {
    const abs = resolve("no-such-folder-7919", "job.json");
    const err = await loadJobConfig({ configPath: abs }).then(() => null, (e: Error) => e);
    expect(err!.message).toContain(`file not found: ${abs}`);
    expect(err!.message).not.toContain("looked for");
  });

  for (const ext of ["txt", "jsonl", "bin"]) {
    test(`a relative .${ext} dataset: the message names the resolved path`, async () => {
      const rel = join("no-such-folder-104729", `corpus.${ext}`);
      await expect(loadCorpus(rel, new ByteTokenizer())).rejects.toThrow(`data.dataset: file not found: ${rel} (looked for ${resolve(rel)};`);
    });
  }
});
