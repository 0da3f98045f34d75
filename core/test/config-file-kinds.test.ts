/**
 * `--config` / `--deepspeed` paths that are not regular files (task P, 2026-12-02): a directory was
 * reported as "file not found" and a FIFO as "file is Infinity bytes, over the 16777216-byte
 * limit"; both now say what the path is. readJsonFile stats the path before reading (reading a FIFO
 * would block until a writer comes).
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../src/config/errors.ts";
import { readJsonFile } from "../src/config/resolve.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-config-kinds-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

async function issue(path: string): Promise<string> {
  try {
    await readJsonFile(path);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).issues[0]!.message;
  }
  throw new Error("expected a ConfigError");
}

test("a directory and a FIFO given as a config file are named as such", async () => {
  const dir = join(ROOT, "job.json");
  mkdirSync(dir);
  expect(await issue(dir)).toBe("not a regular file (a directory)");
  const fifo = join(ROOT, "ds.json");
  expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
  expect(await issue(fifo)).toBe("not a regular file (a FIFO)");
  expect(await issue(join(ROOT, "none.json"))).toStartWith("file not found: ");
});
