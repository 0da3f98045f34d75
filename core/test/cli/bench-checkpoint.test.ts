/**
 * `bun run bench checkpoint` (core/bench/checkpoint.ts) refuses unknown options before any work, and
 * an interrupted run removes its temporary folder.
 *
 * Regressions: `bun run bench checkpoint --bogus` ignored the option and ran the whole benchmark
 * (minutes); stopping it with SIGTERM/Ctrl-C left `/tmp/zeromoe-bench-ckpt-*` behind (628 MB after
 * the 100m model).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { main } from "../../bench/checkpoint.ts";

const scratch = mkdtempSync(join(tmpdir(), "zeromoe-bench-ckpt-test-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("bench checkpoint", () => {
  test("an unknown option, or an option without a value, is an error naming it", async () => {
    await expect(main(["--bogus", "1"])).rejects.toThrow(/unexpected argument --bogus/);
    await expect(main(["--stage", "2", "--models"])).rejects.toThrow(/--models without a value/);
  });

  test("SIGTERM while it runs: exits 143 and removes its temporary folder", async () => {
    const p = Bun.spawn(["bun", resolve(import.meta.dir, "../../src/cli/bench.ts"), "checkpoint", "--models", "default", "--codecs", "raw,raw,raw,raw,raw,raw"], {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, TMPDIR: scratch },
    });
    // wait for the header line naming the folder, then for the folder itself
    const reader = p.stdout.getReader();
    let text = "";
    while (!text.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    const dir = /dir (\S+)/.exec(text)?.[1];
    expect(dir).toBeDefined();
    expect(dir!.startsWith(scratch)).toBe(true);
    for (let i = 0; i < 100 && !existsSync(join(dir!, "default-raw")); i++) await Bun.sleep(50);
    p.kill("SIGTERM");
    expect(await p.exited).toBe(143);
    expect(existsSync(dir!)).toBe(false);
    expect(readdirSync(scratch)).toEqual([]);
  }, 300_000);
});
