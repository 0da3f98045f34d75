/**
 * Odd data and tokenizer files (task P, 2026-12-02). Before: a dataset path that is a directory was
 * reported as "file not found"; a FIFO dataset or tokenizer.json blocked the run forever (SIGTERM
 * included); a 2.5 GB .txt died with "RangeError: Out of memory" and a stack, a 5 GB .bin with
 * "Out of memory" (exit 1): datasets are read whole into one string or typed array, and Bun's end
 * there (2^31 − 1 characters, 2^32 bytes) came after the allocation was tried. Each is now a
 * DataError naming the file before anything is read. The size cases use sparse files (nothing is
 * written to disk). FIFO readers run in a child process with a 2-minute limit (they take well
 * under a second), so a regression fails instead of hanging the suite.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { DataError, loadCorpus, MAX_BIN_DATASET_BYTES, MAX_TEXT_DATASET_BYTES } from "../../src/data/sources.ts";
import { createTokenizer } from "../../src/data/tokenizer.ts";
import { writeFixtureTokenizer } from "./hub-tokenizer-fixture.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-hostile-data-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const SRC = resolve(import.meta.dir, "../../src/data");
const byte = createTokenizer("byte");

async function rejected(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected a rejection");
}

function sparse(name: string, bytes: number): string {
  const path = join(ROOT, name);
  const fd = openSync(path, "w");
  ftruncateSync(fd, bytes);
  closeSync(fd);
  return path;
}

describe("dataset paths that are not regular files", () => {
  test("a directory named like a dataset: DataError saying so (was 'file not found')", async () => {
    for (const ext of ["txt", "jsonl", "bin"]) {
      const d = join(ROOT, `dir.${ext}`);
      mkdirSync(d);
      const e = await rejected(loadCorpus(d, byte));
      expect(e).toBeInstanceOf(DataError);
      expect(e.message).toContain(d);
      expect(e.message).toContain("not a regular file (a directory)");
    }
  });

  test("a FIFO dataset or tokenizer.json: DataError at once, no blocking read", () => {
    for (const f of ["fifo.txt", "fifo.jsonl", "fifo.bin", "tokenizer.json"]) expect(Bun.spawnSync(["mkfifo", join(ROOT, f)]).exitCode).toBe(0);
    const script = join(ROOT, "fifo-child.ts");
    writeFileSync(
      script,
      `import { loadCorpus } from ${JSON.stringify(join(SRC, "sources.ts"))};
       import { createTokenizer } from ${JSON.stringify(join(SRC, "tokenizer.ts"))};
       const root = ${JSON.stringify(ROOT)};
       for (const f of ["fifo.txt", "fifo.jsonl", "fifo.bin"]) {
         try { await loadCorpus(root + "/" + f, createTokenizer("byte")); console.log("no error"); } catch (e) { console.log(e.name + ": " + e.message); }
       }
       try { createTokenizer(root + "/tokenizer.json"); console.log("no error"); } catch (e) { console.log(e.name + ": " + e.message); }
       console.log("OK");`,
    );
    const r = Bun.spawnSync(["bun", script], { timeout: 120_000, killSignal: "SIGKILL" });
    const out = r.stdout.toString();
    expect(out, r.stderr.toString()).toContain("OK");
    const lines = out.split("\n").filter((l) => l !== "" && l !== "OK");
    expect(lines.length, out).toBe(4);
    for (const l of lines) {
      expect(l).toStartWith("DataError: ");
      expect(l).toContain("not a regular file (a FIFO)");
    }
  }, 300_000);
});

describe("dataset sizes are checked before the file is read", () => {
  test("a text dataset over the limit (sparse file)", async () => {
    expect(MAX_TEXT_DATASET_BYTES).toBe(2 ** 31 - 1);
    for (const [name, tok] of [["big.txt", byte], ["big.jsonl", byte]] as const) {
      const path = sparse(name, MAX_TEXT_DATASET_BYTES + 1);
      const e = await rejected(loadCorpus(path, tok));
      expect(e).toBeInstanceOf(DataError);
      expect(e.message).toContain(path);
      expect(e.message).toContain(`${MAX_TEXT_DATASET_BYTES + 1} bytes is over the ${MAX_TEXT_DATASET_BYTES}-byte limit`);
    }
  });

  test("a .bin dataset over the limit (sparse file); one at the limit's scale is not refused for its size", async () => {
    expect(MAX_BIN_DATASET_BYTES).toBe(2 ** 32);
    const path = sparse("big.bin", MAX_BIN_DATASET_BYTES + 2);
    const e = await rejected(loadCorpus(path, byte));
    expect(e).toBeInstanceOf(DataError);
    expect(e.message).toContain(`${MAX_BIN_DATASET_BYTES + 2} bytes is over the ${MAX_BIN_DATASET_BYTES}-byte limit`);
    // small files are unaffected
    const ok = join(ROOT, "ok.bin");
    writeFileSync(ok, new Uint8Array(new Uint16Array([1, 2, 3, 250]).buffer));
    expect(Array.from((await loadCorpus(ok, byte)).tokens)).toEqual([1, 2, 3, 250]);
  });
});

describe("tokenizer.json ids must be non-negative integers", () => {
  // a vocab id of -5 reached the model as 65531 (Uint16Array wrap): eval died with "inputIds[0] =
  // 65531 is outside [0, 300)" and a stack; an id of 1.5 was truncated to 1 silently
  test("model.vocab and added_tokens: -5, 1.5, \"7\" are a DataError naming the token", () => {
    let n = 0;
    for (const bad of [-5, 1.5, "7"]) {
      for (const where of ["vocab", "added"] as const) {
        const dir = join(ROOT, `tok-${n++}`);
        writeFixtureTokenizer(dir);
        const file = join(dir, "tokenizer.json");
        const j = JSON.parse(readFileSync(file, "utf8"));
        if (where === "vocab") j.model.vocab["a"] = bad;
        else j.added_tokens.push({ id: bad, content: "<odd>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
        writeFileSync(file, JSON.stringify(j));
        let e: unknown;
        try {
          createTokenizer(dir);
        } catch (x) {
          e = x;
        }
        expect(e, `${where} ${bad}`).toBeInstanceOf(DataError);
        expect((e as Error).message).toContain(file);
        expect((e as Error).message).toContain(where === "vocab" ? `model.vocab["a"]` : `added_tokens[`);
        expect((e as Error).message).toContain("a non-negative integer id");
      }
    }
  });
});
