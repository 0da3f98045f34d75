/**
 * `aio` keys act on NVMe optimizer-state files only: with offload on but offload_optimizer.device not
 * "nvme" (e.g. offload_param nvme alone, whose shard files are read and written whole), a non-default
 * aio key is warned about by name instead of being silently ignored ("every key acts, or is refused
 * or warned about"). Before, `aio.block_size 1000` there was accepted without a word.
 */
import { expect, test } from "@zeromoe/kernels/runtime/bdd";
import { DEFAULT_JOB, resolveJobConfig } from "@zeromoe/core/config";
import { offloadOptions } from "../src/options.ts";

const job = (zero: Record<string, unknown>, aio: Record<string, unknown> = {}) =>
  resolveJobConfig({ ...DEFAULT_JOB, zero_optimization: zero, aio }).config;

test("aio keys with parameter-only NVMe offload: warned about by name", () => {
  const o = offloadOptions(job({ stage: 3, offload_param: { device: "nvme", nvme_path: "/tmp/x" } }, { block_size: 1000, single_submit: true }));
  expect(o.warnings.filter((w) => w.startsWith("aio."))).toEqual([
    'aio.block_size 1000 applies to NVMe optimizer states only (zero_optimization.offload_optimizer.device "nvme"); no effect here',
    'aio.single_submit true applies to NVMe optimizer states only (zero_optimization.offload_optimizer.device "nvme"); no effect here',
  ]);
});

test("default aio, or NVMe optimizer states: no aio warning", () => {
  expect(offloadOptions(job({ stage: 2, offload_optimizer: { device: "cpu" } })).warnings.filter((w) => w.startsWith("aio."))).toEqual([]);
  expect(offloadOptions(job({ stage: 2, offload_optimizer: { device: "nvme", nvme_path: "/tmp/x" } }, { block_size: 8192, thread_count: 3 })).warnings.filter((w) => w.startsWith("aio."))).toEqual([]);
});
