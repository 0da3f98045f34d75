/**
 * An export copies the tokenizer and generation_config.json files from the model's source
 * directories (core/src/checkpoint/hub-side-files.ts): model.from_pretrained first, then the
 * directory of data.tokenizer; regular files only, nothing the export wrote replaced.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { copyHubSideFiles, sideFileSources } from "../../src/checkpoint/hub-side-files.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-side-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

test("tokenizer files and generation_config.json are copied; the first source wins; existing files stay", () => {
  const hub = join(ROOT, "hub");
  const tok = join(ROOT, "tok");
  const out = join(ROOT, "out");
  for (const d of [hub, tok, out]) mkdirSync(d, { recursive: true });
  writeFileSync(join(hub, "generation_config.json"), '{"do_sample": true, "temperature": 0.6}');
  writeFileSync(join(hub, "tokenizer_config.json"), '{"from": "hub"}');
  writeFileSync(join(hub, "config.json"), '{"from": "hub"}');
  writeFileSync(join(tok, "tokenizer.json"), '{"model": {}}');
  writeFileSync(join(tok, "tokenizer_config.json"), '{"from": "tok"}');
  writeFileSync(join(tok, "special_tokens_map.json"), "{}");
  mkdirSync(join(tok, "merges.txt")); // not a regular file: skipped
  writeFileSync(join(out, "config.json"), '{"from": "export"}');
  const sources = sideFileSources({ model: { from_pretrained: hub } as never, data: { tokenizer: join(tok, "tokenizer.json") } as never });
  expect(sources).toEqual([hub, tok]);
  const copied = copyHubSideFiles(out, sources);
  expect(copied.sort()).toEqual(["generation_config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]);
  expect(readFileSync(join(out, "tokenizer_config.json"), "utf8")).toContain("hub");
  expect(readFileSync(join(out, "config.json"), "utf8")).toContain("export"); // never replaced, never copied
  expect(existsSync(join(out, "merges.txt"))).toBe(false);
  // a second export into the same directory copies nothing again
  expect(copyHubSideFiles(out, sources)).toEqual([]);
});

test("byte / gpt2 tokenizers and a job without from_pretrained have no sources", () => {
  expect(sideFileSources({ model: {} as never, data: { tokenizer: "byte" } as never })).toEqual([]);
  expect(sideFileSources({ model: {} as never, data: { tokenizer: "gpt2" } as never })).toEqual([]);
  const dir = join(ROOT, "tokdir");
  mkdirSync(dir);
  writeFileSync(join(dir, "tokenizer.json"), "{}");
  expect(sideFileSources({ model: {} as never, data: { tokenizer: dir } as never })).toEqual([dir]);
});
