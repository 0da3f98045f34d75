/**
 * A third-party plugin as a package OUTSIDE the repository, exactly as docs/plugins.md walks a
 * newcomer through it:
 *   1. pack @zeromoe/kernels and @zeromoe/core (`bun pm pack`: the tarballs a registry would hold);
 *   2. the plugin's own folder in a temporary directory: package.json, src/index.ts and its test
 *      (copied from core/test/out-of-tree/grad-count/), `bun add -d` of the two tarballs, then
 *      `bun test` there — the plugin's tests run against the installed packages, through
 *      `@zeromoe/core/testing`;
 *   3. pack the plugin; a separate training project `bun add`s core, kernels and the plugin
 *      tarball, and its job file lists the plugin by PACKAGE NAME; `zeromoe-train` (the bin of
 *      @zeromoe/core) trains one step on the cpu backend with it, and the plugin's log line shows.
 * Installs use `--prefer-offline` (bun's cache; the network only for what it lacks). Until the
 * packages are on a registry, `overrides` points core's dependency @zeromoe/kernels at its tarball.
 *
 * Regression (issue 10): `"plugins": ["zeromoe-plugin-x"]` failed with "Cannot find package", and a
 * plugin by path failed with "Cannot find package '@zeromoe/core'".
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const REPO = resolve(import.meta.dir, "../..");
const TEMPLATE = join(import.meta.dir, "out-of-tree/grad-count");
const root = realpathSync(mkdtempSync(join(tmpdir(), "zeromoe-out-of-tree-")));
afterAll(() => rm(root, { recursive: true, force: true }), 120_000);

/** Run a command; returns its exit code and output (both streams). */
async function sh(cmd: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  const p = Bun.spawn(cmd, { cwd, stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1", ...env } });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out: out + err };
}

/** `bun pm pack` of the package in `dir` into `dest`; returns the tarball's path. */
async function pack(dir: string, dest: string): Promise<string> {
  const before = new Set(readdirSync(dest));
  const r = await sh(["bun", "pm", "pack", "--destination", dest], dir);
  expect(r.code, r.out).toBe(0);
  const made = readdirSync(dest).filter((f) => f.endsWith(".tgz") && !before.has(f));
  expect(made.length, r.out).toBe(1);
  return join(dest, made[0]!);
}

function writeJson(path: string, value: unknown): void {
  writeFileSync(path, JSON.stringify(value, null, 2) + "\n");
}

describe("a plugin package outside the repository", () => {
  test("installs with bun add of tarballs, passes its own tests, and trains one step loaded by package name", async () => {
    expect(root.startsWith(REPO)).toBe(false);
    const tarballs = join(root, "tarballs");
    mkdirSync(tarballs);
    const kernels = await pack(join(REPO, "kernels"), tarballs);
    const core = await pack(join(REPO, "core"), tarballs);
    const overrides = { "@zeromoe/kernels": `file:${kernels}` };

    // 2. the plugin's package
    const plugin = join(root, "zeromoe-plugin-grad-count");
    cpSync(TEMPLATE, plugin, { recursive: true });
    writeJson(join(plugin, "package.json"), {
      name: "zeromoe-plugin-grad-count",
      version: "0.1.0",
      type: "module",
      exports: { ".": "./src/index.ts" },
      files: ["src"],
      peerDependencies: { "@zeromoe/core": "^0.1.0" },
      overrides,
    });
    let r = await sh(["bun", "add", "--prefer-offline", "--dev", kernels, core], plugin);
    expect(r.code, r.out).toBe(0);
    r = await sh(["bun", "test"], plugin);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain("1 pass");
    const pluginTgz = await pack(plugin, tarballs);

    // 3. a training project that installs the plugin and names it in its job
    const project = join(root, "project");
    mkdirSync(project);
    writeJson(join(project, "package.json"), { name: "my-training-project", private: true, type: "module", overrides });
    r = await sh(["bun", "add", "--prefer-offline", kernels, core, pluginTgz], project);
    expect(r.code, r.out).toBe(0);
    const installed = JSON.parse(readFileSync(join(project, "node_modules/zeromoe-plugin-grad-count/package.json"), "utf8")) as { name: string };
    expect(installed.name).toBe("zeromoe-plugin-grad-count");
    mkdirSync(join(project, "jobs"));
    writeJson(join(project, "jobs/job.json"), {
      model: { model_type: "llama", vocab_size: 256, hidden_size: 12, intermediate_size: 23, num_hidden_layers: 1, num_attention_heads: 3, max_position_embeddings: 16 },
      data: { dataset: "moby-dick", seq_len: 7 },
      train_micro_batch_size_per_gpu: 2,
      plugins: ["zeromoe-plugin-grad-count"],
    });
    // run from another directory: the package is resolved from the job file's directory upwards
    r = await sh(["bun", join(project, "node_modules/.bin/zeromoe-train"), "--config", join(project, "jobs/job.json"), "--steps", "1", "--backend", "cpu", "--summary", join(root, "summary.json")], root);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/grad-count: \d+ unit gradients over 1 micro-batches/);
    const summary = JSON.parse(readFileSync(join(root, "summary.json"), "utf8")) as { losses: number[] };
    expect(summary.losses.length).toBe(1);
    expect(Number.isFinite(summary.losses[0])).toBe(true);
    // the trainer that ran is the installed copy, not the repository's
    expect(readFileSync(join(project, "node_modules/@zeromoe/core/package.json"), "utf8")).toContain('"@zeromoe/kernels": "0.1.0"');

    // a plugin the project did not install: a config error that says what to run
    writeJson(join(project, "jobs/missing.json"), { ...JSON.parse(readFileSync(join(project, "jobs/job.json"), "utf8")), plugins: ["zeromoe-plugin-not-installed"] });
    r = await sh(["bun", join(project, "node_modules/.bin/zeromoe-train"), "--config", join(project, "jobs/missing.json"), "--steps", "1", "--backend", "cpu"], project);
    expect(r.code, r.out).toBe(2);
    expect(r.out).toContain('cannot load "zeromoe-plugin-not-installed"');
    expect(r.out).toContain("bun add zeromoe-plugin-not-installed");
    expect(r.out).not.toContain("    at ");
  }, 300_000);
});
