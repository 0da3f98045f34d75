/**
 * A `plugins` entry that cannot be loaded is the user's to fix: a ConfigError naming the key and the
 * specifier, so `bun run train` exits 2 without a stack trace (core/src/engine/plugin-loader.ts).
 *
 * Regression: `"plugins": ["./no/such/plugin.ts"]` ended the run with a plain Error: exit 1 and a
 * four-line stack trace from the rank worker.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ConfigError } from "../../src/config/errors.ts";
import { importPlugin } from "../../src/engine/plugin-loader.ts";

const dir = mkdtempSync(join(tmpdir(), "zeromoe-plugin-load-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("plugins: load errors", () => {
  test("a missing path or package, and a module without a plugin, are ConfigErrors on key plugins", async () => {
    const noPlugin = join(dir, "not-a-plugin.ts");
    writeFileSync(noPlugin, "export const answer = 41 + 1;\n");
    for (const [spec, text] of [
      ["./no/such/plugin.ts", 'cannot load "./no/such/plugin.ts"'],
      ["zeromoe-no-such-plugin-package", 'cannot load "zeromoe-no-such-plugin-package"'],
      [noPlugin, "exports no plugin"],
    ] as const) {
      const err = await importPlugin(spec, dir).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues.map((i) => i.path)).toEqual(["plugins"]);
      expect((err as ConfigError).message).toContain(text);
    }
  });

  test("a module that throws while importing keeps its own error (a plugin bug, not a config error)", async () => {
    const broken = join(dir, "broken.ts");
    writeFileSync(broken, 'throw new Error("plugin bug 7");\n');
    const err = await importPlugin(broken, dir).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain("plugin bug 7");
  });

  test("bun run train with a missing plugin exits 2 with the key and no stack trace", async () => {
    const job = join(dir, "job.json");
    writeFileSync(job, JSON.stringify({
      model: { model_type: "llama", vocab_size: 256, hidden_size: 12, intermediate_size: 23, num_hidden_layers: 1, num_attention_heads: 3, max_position_embeddings: 16 },
      data: { dataset: "moby-dick", seq_len: 7 }, steps: 1, train_micro_batch_size_per_gpu: 2, backend: "cpu",
      plugins: ["./no/such/plugin.ts"],
    }));
    const p = Bun.spawn(["bun", resolve(import.meta.dir, "../../src/cli/train.ts"), "--config", job], { stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
    const [stderr, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
    expect(code).toBe(2);
    expect(stderr).toContain('plugins: cannot load "./no/such/plugin.ts"');
    expect(stderr).not.toContain("    at ");
  }, 30_000);
});
