/**
 * `bench memory-estimate` (core/bench/memory-estimate.ts): prints, for a job file, the model states
 * and the peak the memory check computes (core/src/train/memory-peak.ts) with the same plugins —
 * the figures equal `estimatePeak`'s — and names a bad flag.
 */
import { afterAll, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../bench/memory-estimate.ts";
import { resolveJobConfig } from "../../src/config/resolve.ts";
import { loadJobPlugins } from "../../src/train/job-plugins.ts";
import { estimateModelState } from "../../src/train/memory-estimate.ts";
import { estimatePeak } from "../../src/train/memory-peak.ts";

const dir = mkdtempSync(join(tmpdir(), "zeromoe-mem-est-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const JOB = {
  model: { model_type: "mixtral", vocab_size: 263, hidden_size: 64, intermediate_size: 96, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 256, num_local_experts: 5, num_experts_per_tok: 2 },
  data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 127 }, bf16: { enabled: true }, train_micro_batch_size_per_gpu: 5,
  optimizer: { type: "AdamW", params: { lr: 1e-3 } },
};

describe("bench memory-estimate", () => {
  test("prints the memory check's model states and peak for a job file", async () => {
    const file = join(dir, "job.json");
    writeFileSync(file, JSON.stringify(JOB));
    const lines: string[] = [];
    const log = spyOn(console, "log").mockImplementation((...a: unknown[]) => void lines.push(a.join(" ")));
    try {
      await main([file, "--moments"]);
    } finally {
      log.mockRestore();
    }
    const { config } = resolveJobConfig(JOB);
    const ms = estimateModelState(config, (await loadJobPlugins(config)).plugins);
    const p = estimatePeak(config, ms, "webgpu", 2147483644);
    const e9 = (b: number) => `${(b / 1e9).toFixed(2)}e9`;
    expect(lines[0]).toBe(`${file}: model states ${e9(ms.total)} (param ${e9(ms.params)}, grad ${e9(ms.grads)}, optim ${e9(ms.optim)}); peak_total ${e9(p.peak.bytes)} at ${p.peak.name}; + allocator overhead ${e9(p.allocatorOverhead)} = ${e9(p.deviceBytes)} on the device (635 tokens per micro-batch, webgpu)`);
    expect(lines.length).toBe(1 + p.moments.length);
    expect(lines.slice(1).map((l) => l.trim().split(/\s{2,}/)[0])).toEqual(p.moments.map((m) => m.name));
  });

  test("a bad flag or no job is an error naming it", async () => {
    await expect(main(["--backend", "gpu", "x.json"])).rejects.toThrow(/--backend must be webgpu or cpu, got gpu/);
    await expect(main(["--max-binding", "-3", "x.json"])).rejects.toThrow(/--max-binding must be a positive byte count, got -3/);
    await expect(main([])).rejects.toThrow(/no job file given/);
  });
});
