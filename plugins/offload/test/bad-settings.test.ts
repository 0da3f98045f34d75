/**
 * Offload settings a new user gets wrong, through the real CLI (`core/src/cli/train.ts`): each one
 * either trains or exits 2 naming the key and the fix, without a stack trace.
 * - `nvme_path` naming a regular file (optimizer and parameter offload): exit 2 naming the key.
 * - a huge `offload_optimizer.buffer_count` (1e9): more staging slots than NVMe units are useless,
 *   so the plugin allocates at most one slot per unit and trains (it used to allocate 333M slots
 *   and die of memory).
 * - `aio.block_size` above 1 GiB with NVMe optimizer states: exit 2 naming it (each state region is
 *   padded to a whole block; 2^44 made 48 TiB files and failed with EFBIG and a stack trace).
 * - `ZEROMOE_OFFLOAD_THREADS` set to something other than a positive integer: exit 2 naming it.
 * - `offload_optimizer.ratio` so small that no unit is offloaded (0): trains, with a warning naming it.
 */
import { afterAll, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runTrainCli } from "./fixtures/train-cli.ts";

const ROOT = mkdtempSync(join(tmpdir(), "offload-bad-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const A_FILE = join(ROOT, "a-file");
writeFileSync(A_FILE, "not a directory\n");

function jobFile(name: string, zero: Record<string, unknown>): string {
  const job = {
    model: { model_type: "llama", vocab_size: 256, hidden_size: 32, intermediate_size: 88, num_hidden_layers: 1, num_attention_heads: 2, max_position_embeddings: 16 },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 },
    backend: "cpu", steps: 2, seed: 7, train_micro_batch_size_per_gpu: 2,
    optimizer: { type: "AdamW", params: { lr: 1e-3 } },
    zero_optimization: zero,
  };
  const p = join(ROOT, name);
  writeFileSync(p, JSON.stringify(job));
  return p;
}

test("offload_optimizer.nvme_path on a regular file: exit 2 naming the key, no stack trace", async () => {
  const r = await runTrainCli(["--config", jobFile("opt-file.json", { stage: 2, offload_optimizer: { device: "nvme", nvme_path: A_FILE } })]);
  expect(r.code).toBe(2);
  expect(r.out).toContain("zero_optimization.offload_optimizer.nvme_path");
  expect(r.out).toContain(A_FILE);
  expect(r.out).not.toMatch(/\n\s+at /);
}, 300_000);

test("offload_param.nvme_path under a regular file: exit 2 naming the key, no stack trace", async () => {
  const zero = { stage: 3, stage3_param_persistence_threshold: 0, offload_param: { device: "nvme", nvme_path: join(A_FILE, "sub") } };
  const r = await runTrainCli(["--config", jobFile("param-file.json", zero)]);
  expect(r.code).toBe(2);
  expect(r.out).toContain("zero_optimization.offload_param.nvme_path");
  expect(r.out).not.toMatch(/\n\s+at /);
}, 300_000);

test("offload_optimizer.buffer_count 1e9: trains with one staging slot per unit, same losses as buffer_count 6", async () => {
  const losses = async (name: string, bufferCount: number) => {
    const summary = join(ROOT, `${name}.summary.json`);
    const zero = { stage: 2, offload_optimizer: { device: "nvme", nvme_path: join(ROOT, `nvme-${name}`), buffer_count: bufferCount } };
    const r = await runTrainCli(["--config", jobFile(`${name}.json`, zero), "--summary", summary]);
    expect(r.out).not.toMatch(/\n\s+at /);
    expect(r.code).toBe(0);
    return JSON.parse(readFileSync(summary, "utf8")).losses as number[];
  };
  const want = await losses("six", 6);
  expect(want.length).toBe(2);
  expect(await losses("huge", 1e9)).toEqual(want);
}, 300_000);

test("aio.block_size 2^44 with NVMe optimizer states: exit 2 naming aio.block_size (was EFBIG from ftruncate with a stack trace)", async () => {
  const path = join(ROOT, "big-block.json");
  writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(jobFile("big-block.json", { stage: 1, offload_optimizer: { device: "nvme", nvme_path: join(ROOT, "nvme-big") } }), "utf8")), aio: { block_size: 2 ** 44 } }));
  const r = await runTrainCli(["--config", path]);
  expect(r.code).toBe(2);
  expect(r.out).toContain("aio.block_size");
  expect(r.out).not.toMatch(/\n\s+at /);
}, 300_000);

test("ZEROMOE_OFFLOAD_THREADS not a positive integer: exit 2 naming the variable before launch (was silently the default)", async () => {
  const job = jobFile("threads.json", { stage: 1, offload_optimizer: { device: "cpu" } });
  for (const v of ["abc", "0", "1.5", "-2"]) {
    const r = await runTrainCli(["--config", job], { ZEROMOE_OFFLOAD_THREADS: v });
    expect(r.code).toBe(2);
    expect(r.out).toContain(`ZEROMOE_OFFLOAD_THREADS: host AdamW threads per rank: expected a positive integer, got "${v}"`);
    expect(r.out).not.toContain("training windows"); // refused before the data is loaded
    expect(r.out).not.toMatch(/\n\s+at /);
  }
  expect((await runTrainCli(["--config", job], { ZEROMOE_OFFLOAD_THREADS: "3" })).code).toBe(0);
}, 300_000);

test("offload_optimizer.ratio so small that no unit is offloaded: trains, and says so", async () => {
  const r = await runTrainCli(["--config", jobFile("ratio0.json", { stage: 2, offload_optimizer: { device: "cpu", ratio: 0 } })]);
  expect(r.code).toBe(0);
  expect(r.out).toContain("warning: zero_optimization.offload_optimizer.ratio 0: no unit's optimizer states were offloaded");
  const some = await runTrainCli(["--config", jobFile("ratio1.json", { stage: 2, offload_optimizer: { device: "cpu", ratio: 1 } })]);
  expect(some.code).toBe(0);
  expect(some.out).not.toContain("no unit's optimizer states were offloaded");
}, 300_000);
