import { describe, expect, test } from "bun:test";
import { MEM_TAGS, type MemTag } from "@zeromoe/kernels";
import { formatEvalLine, formatMemory, formatStepLine } from "../../src/train/log.ts";
import { evalBatchCount } from "../../src/train/loop.ts";
import { buildSummary, checkSummary, type RankReport } from "../../src/train/summary.ts";

/** A plausible report of rank `r` of a 3-step run with random figures. */
function report(r: number, seed: number): RankReport {
  let x = seed * 7919 + r * 104729 + 17;
  const rnd = () => ((x = (x * 1103515245 + 12345) % 2147483648) / 2147483648);
  const losses = [5.5 - rnd(), 4.7 - rnd(), 3.9 - rnd()];
  return {
    rank: r,
    backend: { name: "cpu", adapter: "cpu (TypeScript, f32)", reason: "test" },
    numParameters: 262976,
    startStep: 0,
    checkpoints: [],
    losses,
    stepSeconds: [0.3 + rnd(), 0.2 + rnd(), 0.2 + rnd()],
    valLoss: 3.5 + rnd(),
    tokensPerStep: 7 * 13,
    memory: { rank: r, params: 1051904, grads: 525952, optim: 1051904, gathered: 4096, activation: 0, comm: 0, other: 0, padding: 12, peak_total: 9e6, peak_by_tag: { param: 1051904, grad: 525952, optim: 1051904, activation: 4e6, gathered: 4096, comm: 0, other: 0 } },
    comm: { rank: r, all_gather: 1e5 * rnd(), reduce_scatter: 1e5 * rnd(), all_reduce: 104, all_to_all: 0, broadcast: 0 },
    sections: { moe: { expert_counts: [[5, 0, 11], [7, 6, 3]], step_expert_counts: [[[2, 0, 4], [3, 2, 1]], [[3, 0, 7], [4, 4, 2]]], aux_loss: 1.01, dropped_tokens: 0 } },
  };
}

describe("summary", () => {
  test("buildSummary: rank 0's losses, per-rank lists in rank order, tokens/s from step times", () => {
    const reps = [report(0, 3), report(1, 3), report(2, 3)];
    const s = buildSummary(reps);
    expect(checkSummary(s)).toEqual([]);
    expect(s.world_size).toBe(3);
    expect(s.steps).toBe(3);
    expect(s.final_loss).toBe(reps[0]!.losses[2]!);
    const secs = reps[0]!.stepSeconds[0]! + reps[0]!.stepSeconds[1]! + reps[0]!.stepSeconds[2]!;
    expect(s.tokens_per_second).toBeCloseTo((3 * 91) / secs, 9);
    expect(s.memory.per_rank.map((m) => m.rank)).toEqual([0, 1, 2]);
    expect(s.comm.per_rank[2]).toEqual(reps[2]!.comm);
    expect(JSON.parse(JSON.stringify(s))).toEqual(s);
    expect(() => buildSummary([])).toThrow(/no rank reports/);
  });

  test("checkSummary names each broken field", () => {
    const good = () => JSON.parse(JSON.stringify(buildSummary([report(0, 5), report(1, 5)])));
    const cases: [(s: Record<string, any>) => void, RegExp][] = [
      [(s) => delete s.world_size, /^world_size: expected an integer/],
      [(s) => (s.losses = [1, "x", 2]), /^losses\[1\]: expected a finite number/],
      [(s) => s.losses.pop(), /^losses: expected 3 entries \(steps\), got 2/],
      [(s) => (s.val_loss = "low"), /^val_loss: expected a finite number or null/],
      [(s) => (s.tokens_per_second = -1), /^tokens_per_second: expected a size/],
      [(s) => (s.backend = { name: "cpu" }), /^backend: expected \{name/],
      [(s) => s.memory.per_rank.pop(), /^memory\.per_rank: expected 2 entries \(world_size\), got 1/],
      [(s) => delete s.memory.per_rank[1].peak_total, /^memory\.per_rank\[1\]\.peak_total: expected a size/],
      [(s) => (s.comm.per_rank[0].rank = 1), /^comm\.per_rank\[0\]\.rank: expected 0, got 1/],
      [(s) => (s.comm.per_rank[1].all_to_all = null), /^comm\.per_rank\[1\]\.all_to_all: expected a size/],
      [(s) => s.moe.expert_counts[1].pop(), /^moe\.expert_counts\[1\]: expected 3 experts \(or none: a dense layer\), got 2/],
      [(s) => (s.moe.expert_counts[0][2] = 1.5), /^moe\.expert_counts\[0\]\[2\]: expected a count/],
      [(s) => s.moe.step_expert_counts[1][0].pop(), /^moe\.step_expert_counts\[1\]: expected 2 layers of counts/],
      [(s) => (s.moe.step_expert_counts = [...s.moe.step_expert_counts, ...s.moe.step_expert_counts]), /^moe\.step_expert_counts: 4 steps, more than steps 3/],
      [(s) => delete s.moe.dropped_tokens, /^moe\.dropped_tokens: expected a size/],
      [(s) => (s.start_step = -1), /^start_step: expected an integer ≥ 0/],
      [(s) => (s.checkpoints = [3]), /^checkpoints: expected an array of strings/],
    ];
    // a dense layer of a sparse family: an empty row in both arrays is valid
    const withDense = good();
    withDense.moe.expert_counts = [[], ...withDense.moe.expert_counts];
    withDense.moe.step_expert_counts = withDense.moe.step_expert_counts.map((st: number[][]) => [[], ...st]);
    expect(checkSummary(withDense)).toEqual([]);
    for (const [breakIt, re] of cases) {
      const s = good();
      breakIt(s);
      const problems = checkSummary(s);
      expect(problems.length).toBeGreaterThan(0);
      expect(problems.some((p) => re.test(p))).toBe(true);
    }
    const dense = good();
    dense.moe = null;
    expect(checkSummary(dense)).toEqual([]);
    expect(checkSummary([1, 2])).toEqual(["(root): expected an object"]);
  });
});

describe("log lines", () => {
  test("step line shows step, loss, lr, tokens/s, loss scale and memory per tag in MiB", () => {
    const memory = Object.fromEntries(MEM_TAGS.map((t) => [t, 0])) as Record<MemTag, number>;
    memory.param = 3 * 1048576;
    memory.optim = 1572864;
    memory.activation = 1;
    const line = formatStepLine({ step: 7, totalSteps: 131, loss: 3.14159, lr: 0.00123, tokensPerSecond: 2950.4, lossScale: 65536, gradNorm: 0.98765, skipped: false, memory, paddingBytes: 524288, peakTotal: 15072344 });
    expect(line).toBe("step   7/131 | loss 3.1416 | lr 1.23e-3 | 2950 tok/s | scale 65536 | grad_norm 0.988 | mem MiB param 3.00 optim 1.50 activation 0.00 padding 0.50 | peak MiB 14.37");
    const skipped = formatStepLine({ step: 131, totalSteps: 131, loss: NaN, lr: 1e-4, tokensPerSecond: 0, lossScale: 32768, gradNorm: Infinity, skipped: true, memory, paddingBytes: 0, peakTotal: 0 });
    expect(skipped).toContain("grad_norm Infinity");
    expect(skipped).toContain("SKIPPED (inf/NaN gradients)");
    expect(formatMemory(Object.fromEntries(MEM_TAGS.map((t) => [t, 0])) as Record<MemTag, number>)).toBe("0");
    expect(formatEvalLine(50, 2.345678, 24, 1.25)).toBe("eval step 50 | val_loss 2.3457 | 24 sequences | 1.3 s");
  });

  test("evalBatchCount: the same whole number of micro-batches on every rank", () => {
    // 23 windows, micro 3 → 7 slots; 2 ranks → 3 rounds; capped by eval_batches
    expect(evalBatchCount(23, 3, 2, 4)).toBe(3);
    expect(evalBatchCount(23, 3, 2, 2)).toBe(2);
    expect(evalBatchCount(23, 3, 1, 100)).toBe(7);
    expect(evalBatchCount(5, 3, 2, 4)).toBe(0);
    expect(evalBatchCount(0, 1, 1, 4)).toBe(0);
  });
});
