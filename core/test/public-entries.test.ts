/**
 * A library user needs only the public entries (package.json `exports`): Hub loading
 * (`@zeromoe/core/checkpoint`), the data loader and tokenizers (`@zeromoe/core/data`) — a script
 * that trained from a Hub directory needed deep imports into src/ before. Here a Hub directory is
 * read into an engine and a data loader feeds it one step, through the package names alone.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { Engine, pluginsForJob } from "@zeromoe/core";
import { HubCheckpoint, initFromHub, loadStateDict } from "@zeromoe/core/checkpoint";
import { createSoloCommunicator } from "@zeromoe/core/comm";
import { resolveJobConfig, resolveModelConfig } from "@zeromoe/core/config";
import { DataLoader, createTokenizer } from "@zeromoe/core/data";

const DIR = "core/test/fixtures/qwen3_moe/sharded";

describe("public entries", () => {
  test("a Hub directory into an engine and one training step from the data loader, by package names", async () => {
    const hub = HubCheckpoint.open(DIR);
    expect(hub.tensors.size).toBeGreaterThan(0);
    hub.close();
    expect(loadStateDict(DIR).size).toBeGreaterThan(0);
    const model = resolveModelConfig(JSON.parse(await Bun.file(`${DIR}/config.json`).text()), "config.json").config;
    const { config } = resolveJobConfig({ model: { ...model, vocab_size: 256 }, data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 }, train_micro_batch_size_per_gpu: 2, steps: 1 });
    const engine = await Engine.create({ config: { ...config, model: { ...config.model, vocab_size: model.vocab_size } } as typeof config, comm: createSoloCommunicator(), backend: new CpuBackend(), plugins: await pluginsForJob(config), log: () => {} });
    const r = await initFromHub(engine, DIR);
    expect(r.elements).toBeGreaterThan(0);
    expect(createTokenizer("byte").vocabSize).toBe(256);
    const loader = await DataLoader.fromConfig({ ...config.data, tokenizer: "byte" }, { micro: 2, accum: 1, worldSize: 1, rank: 0, seed: 1, modelVocabSize: 256 });
    expect(loader.info.trainWindows).toBeGreaterThan(0);
    engine.destroy();
  });
});
