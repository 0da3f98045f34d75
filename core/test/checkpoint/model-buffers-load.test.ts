/**
 * engine.loadCheckpoint gives the model's buffers back (DeepSeek-V3's e_score_correction_bias,
 * recorded in the manifest's plugins.model_buffers, manifest-buffers.ts) whether or not the
 * loading engine was created with `restore: manifest.plugins`: before, a library user's
 * `Engine.create(...)` + `loadCheckpoint(dir)` routed with zero biases and said nothing. A malformed
 * or mismatched entry is a CheckpointError naming the field.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { applyManifestBuffers } from "../../src/checkpoint/manifest-buffers.ts";
import { resolveJobConfig } from "../../src/config/index.ts";
import { Engine } from "../../src/engine/engine.ts";
import { pluginsForJob } from "../../src/engine/plugin-loader.ts";
import { createSoloCommunicator } from "../../src/comm/solo.ts";

const tmp = mkdtempSync(join(tmpdir(), "model-buffers-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const V3 = JSON.parse(readFileSync("core/test/fixtures/deepseek_v3/config.json", "utf8")) as Record<string, unknown>;

async function engineFor(dir: string) {
  const { config } = resolveJobConfig({ model: { ...V3, vocab_size: 256 }, data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 }, train_micro_batch_size_per_gpu: 1, steps: 1, checkpoint: { dir } });
  return Engine.create({ config, comm: createSoloCommunicator(), backend: new CpuBackend(), plugins: await pluginsForJob(config), log: () => {} });
}

describe("model buffers through engine.loadCheckpoint", () => {
  test("a fresh engine (no restore) gets the saved e_score_correction_bias", async () => {
    const ck = join(tmp, "ck");
    const a = await engineFor(ck);
    const names = [...a.modelBuffers().keys()];
    expect(names).toEqual(["model.layers.1.mlp.gate.e_score_correction_bias", "model.layers.2.mlp.gate.e_score_correction_bias"]);
    a.modelBuffers().forEach((b, n) => b.forEach((_, i) => (b[i] = Math.sin(i * 1.3 + n.length))));
    const want = new Map([...a.modelBuffers()].map(([n, b]) => [n, Array.from(b)]));
    await a.saveCheckpoint(ck, "t1");
    a.destroy();
    const b = await engineFor(ck);
    for (const v of b.modelBuffers().values()) expect(v.every((x) => x === 0)).toBe(true);
    await b.loadCheckpoint(ck, "t1");
    for (const [n, v] of b.modelBuffers()) expect(Array.from(v)).toEqual(want.get(n)!);
    b.destroy();
  });

  test("malformed or mismatched entries are refused naming the field; unrecorded buffers are returned", () => {
    const target = new Map([["x.bias", new Float32Array(3)]]);
    expect(applyManifestBuffers(target, {}, "m.json")).toEqual(["x.bias"]);
    expect(() => applyManifestBuffers(target, { model_buffers: [1] }, "m.json")).toThrow("field plugins.model_buffers: expected an object");
    expect(() => applyManifestBuffers(target, { model_buffers: { "x.bias": [1, "2", 3] } }, "m.json")).toThrow('field plugins.model_buffers."x.bias": expected an array of finite numbers');
    expect(() => applyManifestBuffers(target, { model_buffers: { "x.bias": [1, 2] } }, "m.json")).toThrow("2 values, the model's buffer has 3");
    expect(() => applyManifestBuffers(target, { model_buffers: { "y.bias": [1] } }, "m.json")).toThrow("the model has no such buffer (it has x.bias)");
    expect(applyManifestBuffers(target, { model_buffers: { "x.bias": [1, 2, 3] } }, "m.json")).toEqual([]);
    expect(Array.from(target.get("x.bias")!)).toEqual([1, 2, 3]);
  });
});
