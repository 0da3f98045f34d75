/**
 * Pieces of `bun run bench train` (core/bench/train.ts) that need no training run: the job of each
 * precision, the tensor-core column taken from the backend's reason line, and the loss-tracking table.
 */
import { expect, test } from "bun:test";
import { benchJob, formatLossTracking, tensorCoresOfReason, type TrainBenchRow } from "../../bench/train.ts";

const O = { models: ["mixtral-small"], backends: ["webgpu" as const], steps: 2, warmup: 1 };

test("each precision's job: fp16 with DeepSpeed's dynamic loss scaling, bf16 without, fp32 neither", () => {
  const j = (p: "fp32" | "bf16" | "fp16") => benchJob("mixtral-small", "webgpu", p, O) as { fp16: { enabled: boolean }; bf16: { enabled: boolean }; steps: number };
  expect([j("fp32").fp16.enabled, j("fp32").bf16.enabled]).toEqual([false, false]);
  expect([j("bf16").fp16.enabled, j("bf16").bf16.enabled]).toEqual([false, true]);
  expect([j("fp16").fp16.enabled, j("fp16").bf16.enabled]).toEqual([true, false]);
  expect(j("fp16").steps).toBe(3);
  expect(() => benchJob("gpt-9", "cpu", "fp32", O)).toThrow(/unknown model "gpt-9"/);
});

test("tensor-core column: the status after the reason's last '; tensor cores ', else '-'", () => {
  expect(tensorCoresOfReason("webgpu: requested (backend: webgpu); tensor cores on (f32 matmuls …)")).toBe("on (f32 matmuls …)");
  expect(tensorCoresOfReason("webgpu: requested; tensor cores off (the adapter lacks feature 'x'; see y)")).toBe("off (the adapter lacks feature 'x'; see y)");
  expect(tensorCoresOfReason("cpu: requested (backend: cpu)")).toBe("-");
});

test("loss tracking: max |Δ| and relative Δ of each bf16/fp16 row against fp32 of the same model and backend", () => {
  const row = (precision: "fp32" | "bf16" | "fp16", losses: number[], backend: "webgpu" | "cpu" = "webgpu", model = "m"): TrainBenchRow => ({
    model, backend, precision, adapter: "a", tensorCores: "-", params: 1, micro: 1, seqLen: 2, shapeOverridden: false, steps: losses.length, msPerStep: 1, tokensPerSecond: 1, finalLoss: losses.at(-1)!, losses,
  });
  const rows = [row("fp32", [5, 4, 3]), row("bf16", [5.01, 3.98, 3.003]), row("fp16", [5, 4.1]), row("bf16", [1, 1], "cpu"), row("bf16", [2], "webgpu", "other")];
  const t = formatLossTracking(rows).split("\n");
  expect(t.length).toBe(4); // header, rule, bf16 and fp16 rows (no fp32 partner for the cpu and "other" rows)
  expect(t[2]).toBe("| m | webgpu | bf16 vs fp32 | 3 | 2.00e-2 | 0.500 % | 3.0000 | 3.0030 |");
  expect(t[3]).toBe("| m | webgpu | fp16 vs fp32 | 2 | 1.00e-1 | 2.500 % | 4.0000 | 4.1000 |");
  expect(formatLossTracking([row("fp32", [1])])).toBe("");
});
