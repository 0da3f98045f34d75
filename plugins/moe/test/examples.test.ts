/**
 * The MoE example jobs (`examples/moe-zero3-ep2.json`: world 2, ep_size 2, ZeRO-3;
 * `examples/moe-zero2-ep4.json`: world 4, ep_size 4, ZeRO-2, capacity drops, GShard aux) train on
 * Moby Dick through the trainer and the loss falls. Shortened for CI: 14 steps of sequences of 32
 * tokens, no evaluation, cpu backend (the files themselves run 200 steps).
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { runTraining } from "@zeromoe/core";
import { resolveJobConfig } from "@zeromoe/core/config";
import { readFileSync } from "node:fs";

async function shortRun(file: string) {
  const raw = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown> & { data: Record<string, unknown>; scheduler: { params: Record<string, unknown> } };
  const job = { ...raw, steps: 14, eval_interval: 0, backend: "cpu", data: { ...raw.data, seq_len: 32 }, scheduler: { ...raw.scheduler, params: { ...raw.scheduler.params, warmup_num_steps: 4 } } };
  const { config } = resolveJobConfig(job);
  return { config, run: await runTraining(config, { verbose: false, tty: false }) };
}

describe("MoE example jobs train Moby Dick", () => {
  for (const [file, world, ep, stage] of [["examples/moe-zero3-ep2.json", 2, 2, 3], ["examples/moe-zero2-ep4.json", 4, 4, 2]] as const) {
    test(`${file}: world ${world}, ep_size ${ep}, ZeRO-${stage}; loss falls`, async () => {
      const { config, run } = await shortRun(file);
      expect(config.world_size).toBe(world);
      expect(config.moe!.ep_size).toBe(ep);
      expect(config.zero_optimization.stage).toBe(stage);
      const l = run.summary.losses;
      expect(l.length).toBe(14);
      const first = (l[0]! + l[1]!) / 2;
      const last = (l[12]! + l[13]!) / 2;
      expect(last).toBeLessThan(first - 0.5);
      for (const row of run.summary.moe!.expert_counts) expect(row.length).toBe(config.model.model_type === "mixtral" ? config.model.num_local_experts : 0);
    }, 300_000);
  }
});
