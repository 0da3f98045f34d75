/**
 * A `plugins` entry that cannot be loaded is the user's to fix: a ConfigError naming the key and the
 * specifier, so `bun run train` exits 2 without a stack trace (core/src/engine/plugin-loader.ts).
 *
 * Regression: `"plugins": ["./no/such/plugin.ts"]` ended the run with a plain Error: exit 1 and a
 * four-line stack trace from the rank worker.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ConfigError } from "../../src/config/errors.ts";
import { importPlugin, resolvePlugin } from "../../src/engine/plugin-loader.ts";

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
  }, 300_000);

  test("a package name resolves from the job file's directory (upwards), then the working directory", async () => {
    const project = join(dir, "project");
    const pkg = join(project, "node_modules", "zeromoe-plugin-fake");
    mkdirSync(join(pkg, "src"), { recursive: true });
    mkdirSync(join(project, "jobs"), { recursive: true });
    writeFileSync(join(pkg, "package.json"), JSON.stringify({ name: "zeromoe-plugin-fake", type: "module", exports: { ".": "./src/index.ts" } }));
    writeFileSync(join(pkg, "src", "index.ts"), 'export default { name: "fake", setup() {} };\n');
    expect(resolvePlugin("zeromoe-plugin-fake", join(project, "jobs"))).toBe(join(pkg, "src", "index.ts"));
    expect((await importPlugin("zeromoe-plugin-fake", join(project, "jobs"))).name).toBe("fake");
    // from a directory that does not see it (and a working directory that does not either)
    const err = (() => { try { resolvePlugin("zeromoe-plugin-fake", dir); return null; } catch (e) { return e; } })();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain("bun add zeromoe-plugin-fake");
    // a relative path: the job's directory first, then the working directory
    writeFileSync(join(project, "jobs", "local.ts"), 'export default { name: "local", setup() {} };\n');
    expect(resolvePlugin("./local.ts", join(project, "jobs"))).toBe(join(project, "jobs", "local.ts"));
    expect(resolvePlugin("./core/test/engine/plugins/claim-reduce.ts", join(project, "jobs"))).toBe(resolve(process.cwd(), "core/test/engine/plugins/claim-reduce.ts"));
  });

  test("a plugin that cannot find @zeromoe/core is a config error saying to install it", async () => {
    const lonely = join(dir, "lonely");
    mkdirSync(lonely, { recursive: true });
    writeFileSync(join(lonely, "index.ts"), 'import { definePlugin } from "@zeromoe/core-not-installed/plugin";\nexport default definePlugin({ name: "lonely", setup() {} });\n');
    const err = await importPlugin("./lonely/index.ts", dir).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('imports "@zeromoe/core-not-installed", which cannot be found');
    expect((err as Error).message).toContain("bun add @zeromoe/core-not-installed");
  });

  test("built-in names resolve through the registry to their packages", () => {
    for (const n of ["zero1", "zero2", "zero3", "moe"]) expect(resolvePlugin(n)).toBe(resolve(import.meta.dir, `../../../plugins/${n}/src/index.ts`));
  });

  test("bun run train with plugins that cannot be combined exits 2 naming both, before any data is loaded", async () => {
    const job = join(dir, "conflict.json");
    const tiny = join(dir, "tiny-corpus.txt");
    writeFileSync(tiny, "abc");
    writeFileSync(job, JSON.stringify({
      model: { model_type: "llama", vocab_size: 256, hidden_size: 12, intermediate_size: 23, num_hidden_layers: 1, num_attention_heads: 3, max_position_embeddings: 16 },
      // a corpus too small for one window: loading data first would fail on it instead
      data: { dataset: tiny, tokenizer: "byte", seq_len: 7 }, steps: 1, train_micro_batch_size_per_gpu: 2, backend: "cpu",
      zero_optimization: { stage: 2 },
      plugins: [resolve(import.meta.dir, "plugins/claim-reduce.ts")],
    }));
    const p = Bun.spawn(["bun", resolve(import.meta.dir, "../../src/cli/train.ts"), "--config", job], { stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
    const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    expect(code).toBe(2);
    expect(stderr).toContain('plugins "zero2" and "acme-allreduce" both claim the "reduce" hook');
    expect(stderr + stdout).not.toContain("windows"); // the DataError of loading the 3-byte corpus
    expect(stderr).not.toContain("    at ");
  }, 300_000);
});
