/**
 * The device memory budget proves what offload buys (issue 13): a job whose model states (params +
 * grads + optimizer states, 16 bytes per fp32 parameter) exceed `--max-device-memory` exits 2 at
 * the up-front memory check — before any data is loaded — naming `max_device_memory`, the estimated
 * bytes and the offload key as the fix; the same job with `offload_optimizer.device "cpu"` trains
 * under the same budget, with 0 device `optim` bytes, host bytes reported per tag in the summary,
 * and the losses of the unbudgeted run without offload (bit-identical on the cpu backend). At run
 * time the backend's allocator refuses to pass the budget (DeviceBudgetError), naming it.
 */
import { afterAll, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { DeviceBudgetError, withDeviceBudget } from "@zeromoe/core";
import { runTrainCli } from "./fixtures/train-cli.ts";

const dir = mkdtempSync(join(tmpdir(), "offload-budget-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function jobFile(name: string, offload: boolean): string {
  const job = {
    // 467,584 parameters: 7.13 MiB of fp32 model states, 3.57 MiB without the optimizer states
    model: { model_type: "llama", vocab_size: 256, hidden_size: 128, intermediate_size: 352, num_hidden_layers: 2, num_attention_heads: 4, max_position_embeddings: 32 },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 },
    backend: "cpu", steps: 3, seed: 3, train_micro_batch_size_per_gpu: 1,
    optimizer: { type: "AdamW", params: { lr: 1e-3, weight_decay: 0.01 } },
    zero_optimization: { stage: 1, ...(offload ? { offload_optimizer: { device: "cpu" } } : {}) },
  };
  const p = join(dir, name);
  writeFileSync(p, JSON.stringify(job));
  return p;
}

describe("max_device_memory and offload", () => {
  test("without offload: exit 2 at the memory check naming offload and the bytes; with offload: trains, same losses", async () => {
    const plain = jobFile("plain.json", false);
    const off = jobFile("off.json", true);
    const refused = await runTrainCli(["--config", plain, "--max-device-memory", "6MiB"]);
    expect(refused.code).toBe(2);
    expect(refused.out).toContain("max_device_memory: model states need 7.13 MiB (7481344 bytes) per rank on the device");
    expect(refused.out).toContain('zero_optimization.offload_optimizer.device "cpu" → 3.57 MiB (3740672 bytes) on the device');
    expect(refused.out).toContain('zero_optimization.stage 3 with offload_optimizer.device and offload_param.device "cpu" → ');
    expect(refused.out).not.toMatch(/^data +moby-dick: \d+ tokens/m); // refused before the data was loaded
    const s1 = join(dir, "s1.json");
    const s2 = join(dir, "s2.json");
    const ok = await runTrainCli(["--config", off, "--max-device-memory", "6MiB", "--summary", s1]);
    expect(ok.code).toBe(0);
    const base = await runTrainCli(["--config", plain, "--summary", s2]);
    expect(base.code).toBe(0);
    const a = JSON.parse(readFileSync(s1, "utf8"));
    const b = JSON.parse(readFileSync(s2, "utf8"));
    expect(a.losses).toEqual(b.losses);
    expect(a.memory.per_rank[0].optim).toBe(0);
    expect(b.memory.per_rank[0].optim).toBe(467584 * 8);
    expect(a.memory.per_rank[0].peak_total).toBeLessThanOrEqual(6 * 2 ** 20);
    expect(a.offload.host_bytes.optim).toBe(467584 * 12);
    expect(a.offload.moved_bytes.grad_d2h).toBe(3 * 467584 * 4);
  }, 300_000);

  test("offload settings that cannot run exit 2 before any data is loaded, naming the key", async () => {
    const f = join(dir, "bad.json");
    writeFileSync(f, JSON.stringify({ zero_optimization: { stage: 3, offload_optimizer: { device: "nvme", nvme_path: dir, buffer_count: 2 } } }));
    const r = await runTrainCli(["--deepspeed", f, "--backend", "cpu", "--steps", "1"]);
    expect(r.code).toBe(2);
    expect(r.out).toContain("zero_optimization.offload_optimizer.buffer_count: nvme offload stages master, m and v of a unit at once: buffer_count must be at least 3");
    expect(r.out).not.toMatch(/^data +moby-dick: \d+ tokens/m);
  }, 300_000);

  test("the budgeted backend refuses an allocation past the budget, naming it", () => {
    const be = withDeviceBudget(new CpuBackend(), 1000);
    const a = be.alloc("f32", 200, "param");
    expect(() => be.alloc("f32", 51, "activation")).toThrow(DeviceBudgetError);
    expect(() => be.alloc("f32", 51, "activation")).toThrow(/max_device_memory is 1000 B \(1000 bytes\)/);
    be.free(a);
    expect(() => be.free(be.alloc("f32", 250, "activation"))).not.toThrow();
    expect(be.memory().current.param ?? 0).toBe(0);
  });
});
