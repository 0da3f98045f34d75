// Schedulers against values computed independently (Python, from DeepSpeed's lr_schedules.py
// formulas) and hand-derived closed forms.
import { describe, expect, test } from "bun:test";
import { createScheduler, WarmupCosineLR, WarmupDecayLR, WarmupLR, ConstantLR } from "../src/optim/schedulers.ts";

/** lr used by optimizer step s (1-based): DeepSpeed steps the schedule after each optimizer step. */
function lrAtIteration(s: { step(): void; getLr(): number }, t: number): number {
  return t < 0 ? s.getLr() : (s.step(), s.getLr());
}

describe("WarmupLR", () => {
  test("log warmup from 0.01 to 0.1 over 7 steps, then constant", () => {
    const s = new WarmupLR({ warmup_min_lr: 0.01, warmup_max_lr: 0.1, warmup_num_steps: 7, warmup_type: "log" });
    expect(s.getLr()).toBe(0.01); // before the first step: warmup_min_lr
    const want: Record<number, number> = { 0: 0.01, 1: 0.042058646839722005, 3: 0.074117293679444, 6: 0.1, 7: 0.1, 9: 0.1 };
    for (let t = 0; t <= 9; t++) {
      s.step();
      expect(s.lastBatchIteration).toBe(t);
      if (t in want) expect(s.getLr()).toBeCloseTo(want[t], 15);
    }
  });
  test("warmup_num_steps below 2 is raised to 2 (DeepSpeed max(2, n)); linear", () => {
    const s = new WarmupLR({ warmup_min_lr: 0, warmup_max_lr: 0.4, warmup_num_steps: 1, warmup_type: "linear" });
    expect(lrAtIteration(s, 0)).toBe(0);
    expect(lrAtIteration(s, 1)).toBeCloseTo(0.2, 15); // 1/2 of the way
    expect(lrAtIteration(s, 2)).toBe(0.4);
  });
});

describe("WarmupDecayLR", () => {
  test("linear warmup 5 steps to 0.05, linear decay to 0 at 13", () => {
    const s = new WarmupDecayLR({ warmup_min_lr: 0, warmup_max_lr: 0.05, warmup_num_steps: 5, warmup_type: "linear", total_num_steps: 13 });
    const want: Record<number, number> = { 0: 0, 2: 0.02, 4: 0.04, 5: 0.05, 8: 0.03125, 12: 0.00625, 13: 0, 20: 0 };
    for (let t = 0; t <= 20; t++) {
      s.step();
      if (t in want) expect(s.getLr()).toBeCloseTo(want[t], 15);
    }
  });
});

describe("WarmupCosineLR", () => {
  test("log warmup (W=max(2,1)=2) from ratio 0.1, cosine to 0.05 at 11, base lr 0.3", () => {
    const s = new WarmupCosineLR({ total_num_steps: 11, warmup_min_ratio: 0.1, warmup_num_steps: 1, cos_min_ratio: 0.05, warmup_type: "log" }, 0.3);
    expect(s.getLr()).toBe(0); // DeepSpeed returns 0 before the first step
    const want: Record<number, number> = { 0: 0.03, 1: 0.3, 2: 0.29140619846199195, 5: 0.18224486531753759, 10: 0.015, 11: 0.02359380153800805, 15: 0.18224486531753753 };
    for (let t = 0; t <= 15; t++) {
      s.step();
      if (t in want) expect(s.getLr()).toBeCloseTo(want[t], 14);
    }
  });
  test("end of the cosine is cos_min_ratio × base (t = T − 1: π·(T−W)/(T−W) = π)", () => {
    const s = new WarmupCosineLR({ total_num_steps: 37, warmup_min_ratio: 0, warmup_num_steps: 3, cos_min_ratio: 0.25, warmup_type: "linear" }, 2.0);
    s.step(36);
    expect(s.getLr()).toBeCloseTo(0.5, 14);
    s.step(3); // first post-warmup step: cos(π/34)
    expect(s.getLr()).toBeCloseTo(2 * (0.25 + 0.75 * (1 + Math.cos(Math.PI / 34)) / 2), 14);
  });
  test("total_num_steps ≤ warmup: warmup as usual, then cos_min_ratio (where DeepSpeed divides by zero)", () => {
    const s = new WarmupCosineLR({ total_num_steps: 2, warmup_min_ratio: 0, warmup_num_steps: 4, cos_min_ratio: 0.125, warmup_type: "linear" }, 1);
    s.step(1);
    expect(s.getLr()).toBe(0.25);
    s.step(4);
    expect(s.getLr()).toBe(0.125);
  });
});

describe("state and factory", () => {
  test("state_dict round trip resumes the same lr sequence", () => {
    const cfg = { type: "WarmupDecayLR" as const, params: { warmup_min_lr: 0.001, warmup_max_lr: 0.011, warmup_num_steps: 17, warmup_type: "log" as const, total_num_steps: 53 } };
    const a = createScheduler(cfg, 0.5);
    for (let i = 0; i < 23; i++) a.step();
    const b = createScheduler(cfg, 0.5);
    b.loadStateDict(JSON.parse(JSON.stringify(a.stateDict())));
    for (let i = 0; i < 40; i++) {
      expect(b.getLr()).toBe(a.getLr());
      a.step();
      b.step();
    }
    expect(() => b.loadStateDict({ last_batch_iteration: 1.5 })).toThrow(/last_batch_iteration/);
  });
  test("null scheduler is a constant lr", () => {
    const s = createScheduler(null, 0.0037);
    expect(s).toBeInstanceOf(ConstantLR);
    for (let i = 0; i < 5; i++, s.step()) expect(s.getLr()).toBe(0.0037);
  });
});
