/**
 * offload_param acts only on sharded parameters: at ZeRO-3 a unit below
 * `stage3_param_persistence_threshold` stays whole on every rank, so when every unit is below it
 * nothing is offloaded. That is said once (naming the key and the threshold), never hidden; with the
 * threshold lowered the parameters are offloaded and no such warning appears.
 */
import { afterAll, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runTrainCli } from "./fixtures/train-cli.ts";

const dir = mkdtempSync(join(tmpdir(), "offload-param-noop-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function jobFile(name: string, threshold: number | undefined): string {
  const job = {
    model: { model_type: "llama", vocab_size: 256, hidden_size: 48, intermediate_size: 97, num_hidden_layers: 2, num_attention_heads: 4, max_position_embeddings: 16 },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 8 },
    backend: "cpu", steps: 2, seed: 5, train_micro_batch_size_per_gpu: 1,
    zero_optimization: {
      stage: 3,
      offload_optimizer: { device: "cpu" },
      offload_param: { device: "cpu" },
      ...(threshold === undefined ? {} : { stage3_param_persistence_threshold: threshold }),
    },
  };
  const p = join(dir, name);
  writeFileSync(p, JSON.stringify(job));
  return p;
}

test("offload_param with every unit under the persistence threshold warns once; with threshold 0 it offloads and does not", async () => {
  const whole = await runTrainCli(["--config", jobFile("whole.json", undefined), "--summary", join(dir, "a.json")]);
  expect(whole.code).toBe(0);
  const warnings = whole.out.match(/^warning: zero_optimization\.offload_param: no parameters were offloaded.*$/gm) ?? [];
  expect(warnings.length).toBe(1);
  expect(warnings[0]).toContain("stage3_param_persistence_threshold (100000)");
  const sharded = await runTrainCli(["--config", jobFile("sharded.json", 0), "--summary", join(dir, "b.json")]);
  expect(sharded.code).toBe(0);
  expect(sharded.out).not.toContain("no parameters were offloaded");
  const b = JSON.parse(readFileSync(join(dir, "b.json"), "utf8"));
  expect(b.offload.param_device).toBe("cpu");
  expect(b.offload.host_bytes.param).toBeGreaterThan(0);
  expect(b.offload.moved_bytes.param_h2d).toBeGreaterThan(0);
  const a = JSON.parse(readFileSync(join(dir, "a.json"), "utf8"));
  expect(a.offload.host_bytes.param).toBe(0);
}, 300_000);
