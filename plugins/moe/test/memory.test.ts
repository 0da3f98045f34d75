/**
 * Model-state memory per rank with expert parallelism (memory.ts): the formula reproduces
 * docs/domain.md §1's table when there are no experts, and equals the bytes the engine actually holds
 * (backend accounting of the `param`, `grad` and `optim` tags after a step, minus the reported
 * shard padding, summed over ranks; exact per rank at stage 0) at world 4 for ZeRO stages 0–3 × ep_size 1, 2, 4, in fp32 and bf16.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { launch } from "@zeromoe/core/launch";
import { moeModelStateBytes } from "../src/index.ts";
import { TRAIN_ENTRY, tinyMoeJob, type RunArgs, type RunOut } from "./fixtures/train-entry.ts";

describe("per-rank model-state memory with dense and expert parts", async () => {
  test("without experts it is docs/domain.md §1 (Ψ = 7.5e9, N = 64, mixed precision)", () => {
    const gb = (stage: 0 | 1 | 2 | 3) => moeModelStateBytes({ denseParams: 7.5e9, expertParams: 0, worldSize: 64, epSize: 1, stage, mixed: true }).total / 1e9;
    expect(gb(0)).toBeCloseTo(120, 6);
    expect(gb(1)).toBeCloseTo(31.40625, 6);
    expect(gb(2)).toBeCloseTo(16.640625, 6);
    expect(gb(3)).toBeCloseTo(1.875, 6);
    // experts: stage 0 holds Ψ_e/P, stage 3 Ψ_e/N
    const e0 = moeModelStateBytes({ denseParams: 0, expertParams: 8e9, worldSize: 64, epSize: 8, stage: 0, mixed: true });
    expect(e0.total).toBe(16 * 1e9);
    const e3 = moeModelStateBytes({ denseParams: 0, expertParams: 8e9, worldSize: 64, epSize: 8, stage: 3, mixed: false });
    expect(e3.total).toBe((16 * 8e9) / 64);
    expect(() => moeModelStateBytes({ denseParams: 1, expertParams: 1, worldSize: 6, epSize: 4, stage: 0, mixed: true })).toThrow(/world_size 6 is not divisible by ep_size 4/);
  });

  // tinyMoeModel: per layer 4 experts × 3 × 7 × 25 = 2100 expert elements; everything else dense
  const EXPERT = 2 * 4 * 3 * 7 * 25;
  const runs: RunArgs[] = [];
  for (const bf16 of [false, true]) for (const stage of [0, 1, 2, 3]) for (const ep of [1, 2, 4]) {
    runs.push({ label: `${bf16 ? "bf16" : "fp32"} stage ${stage} ep_size ${ep}`, steps: 1, job: tinyMoeJob({ moe: { ep_size: ep }, bf16: { enabled: bf16 }, zero_optimization: { stage, stage3_param_persistence_threshold: 0 } }) });
  }
  const res = await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs } }) as unknown as RunOut[][];
  const numel = Object.values(res[0]![0]!.params).reduce((s, v) => s + v.length, 0); // ep 1 holds all
  runs.forEach((run, i) => {
    test(`world 4, ${run.label}: Σ over ranks of (measured bytes − padding) = 4 × formula`, () => {
      const job = run.job as { moe: { ep_size: number }; bf16: { enabled: boolean }; zero_optimization: { stage: 0 | 1 | 2 | 3 } };
      const f = moeModelStateBytes({ denseParams: numel - EXPERT, expertParams: EXPERT, worldSize: 4, epSize: job.moe.ep_size, stage: job.zero_optimization.stage, mixed: job.bf16.enabled });
      // Shards are equal-sized and padded, so a rank's real elements differ from Ψ/n by the
      // padding it holds; the formula is exact per rank without sharding and summed over ranks.
      let sum = 0;
      for (const o of res.map((r) => r[i]!)) {
        const measured = o.modelState.param + o.modelState.grad + o.modelState.optim;
        if (job.zero_optimization.stage === 0) expect(measured).toBe(f.total);
        sum += measured - o.padding;
      }
      expect(sum).toBe(4 * f.total);
    });
  });
});
