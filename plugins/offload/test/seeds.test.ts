/**
 * The two offload recipes users most often copy train unchanged: "ZeRO-2 + offload_optimizer cpu"
 * (DeepSpeed's ZeRO-Offload tutorial) for the MoE model, and ZeRO-Infinity's "stage 3 +
 * offload_optimizer cpu + offload_param cpu" (the ZeRO-Infinity tutorial), merged as DeepSpeed files over the built-in job (a small Mixtral) with
 * `bun run train --deepspeed`, 2 ranks, 2 steps: exit 0, finite losses, no device optimizer bytes.
 * (The built-in model's units are all below the default stage3_param_persistence_threshold of 1e5
 * elements, so ZeRO-3 keeps them whole on every rank, as DeepSpeed does, and there is no sharded
 * parameter to offload; param-offload.test.ts covers the sharded case.)
 */
import { afterAll, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { scriptArgv, spawn } from "@zeromoe/kernels/runtime";

const ROOT = resolve(import.meta.dirname, "../../..");
const dir = mkdtempSync(join(tmpdir(), "offload-seeds-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SEEDS: Record<string, unknown> = {
  "zero2-offload-optimizer": { zero_optimization: { stage: 2, overlap_comm: true, contiguous_gradients: true, offload_optimizer: { device: "cpu" } } },
  "zero-infinity": { zero_optimization: { stage: 3, offload_optimizer: { device: "cpu" }, offload_param: { device: "cpu" } } },
};

for (const [name, ds] of Object.entries(SEEDS)) {
  test(`seed config ${name} trains`, async () => {
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify(ds));
    const summary = join(dir, `${name}.summary.json`);
    const p = spawn([...scriptArgv(join(ROOT, "core/src/cli/train.ts")), "--deepspeed", file, "--backend", "cpu", "--world-size", "2", "--steps", "2", "--summary", summary], { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
    const [o, e] = await Promise.all([new Response(p.stdout!).text(), new Response(p.stderr!).text()]);
    expect({ code: await p.exited, out: o + e }).toMatchObject({ code: 0 });
    const s = JSON.parse(readFileSync(summary, "utf8"));
    expect(s.losses.length).toBe(2);
    expect(s.losses.every((l: number) => Number.isFinite(l))).toBe(true);
    for (const r of s.memory.per_rank) {
      expect(r.optim).toBe(0);
    }
    expect(s.offload.optimizer_device).toBe("cpu");
    expect(s.offload.host_bytes.optim).toBeGreaterThan(0);
    if (name === "zero-infinity") expect(s.offload.param_device).toBe("cpu");
  }, 300_000);
}
