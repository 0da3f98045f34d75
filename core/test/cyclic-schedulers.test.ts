/**
 * DeepSpeed's OneCycle and LRRangeTest schedules (core/src/optim/cyclic-schedulers.ts) against a
 * reference written here from DeepSpeed's documented rules (deepspeed/runtime/lr_schedules.py), in
 * float64, with random parameters (seeded) at awkward sizes, over whole cycles and the decay phase:
 * the lr and the betas of every step, from last_batch_iteration −1 on; plus the job-config side
 * (DeepSpeed's parameter names and defaults) and a resumed schedule continuing exactly.
 */
import { describe, expect, test } from "bun:test";
import { resolveJobConfig, DEFAULT_JOB } from "../src/config/index.ts";
import { createScheduler } from "../src/optim/schedulers.ts";
import type { LRRangeTestParams, OneCycleParams } from "../src/config/types.ts";

/** mulberry32: a small seeded generator for the random parameters. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Reference OneCycle: lr and beta1 the step after last_batch_iteration `it` uses. */
function refOneCycle(p: OneCycleParams, it: number): { lr: number; mom: number | null } {
  const up = p.cycle_first_step_size;
  const down = p.cycle_second_step_size ?? up;
  const len = up + down;
  const n1 = p.cycle_first_stair_count;
  const n2 = p.cycle_second_stair_count ?? n1;
  const batch = it + 1;
  const inCycle = batch % len; // position inside the current cycle
  // fraction of the way up (rising half) or of the way back down (falling half)
  let f: number;
  if (inCycle <= up) {
    f = n1 > 0 ? Math.floor((inCycle * n1) / up) / n1 : inCycle / up;
  } else {
    f = n2 > 0 ? Math.floor(((len - inCycle) * n2) / down) / n2 : (len - inCycle) / down;
  }
  if (it < len) {
    const lr = p.cycle_min_lr + f * (p.cycle_max_lr - p.cycle_min_lr);
    const mom = !p.cycle_momentum ? null : it < 0 ? p.cycle_min_mom : p.cycle_max_mom - f * (p.cycle_max_mom - p.cycle_min_mom);
    return { lr, mom };
  }
  const k = it - len + 1;
  const lr = p.decay_step_size === 0 || p.decay_lr_rate === 0 ? p.cycle_min_lr : p.cycle_min_lr / (1 + (p.decay_lr_rate * k) / p.decay_step_size);
  const mom = !p.cycle_momentum ? null : p.decay_step_size === 0 || p.decay_mom_rate === 0 ? p.cycle_max_mom : p.cycle_max_mom * (1 + (p.decay_mom_rate * k) / p.decay_step_size);
  return { lr, mom };
}

function refRange(p: LRRangeTestParams, it: number): number {
  const steps = (it + 1) / p.lr_range_test_step_size;
  return p.lr_range_test_min_lr * (1 + p.lr_range_test_step_rate * (p.lr_range_test_staircase ? Math.floor(steps) : steps));
}

const close = (a: number, b: number): void => {
  expect(Math.abs(a - b)).toBeLessThanOrEqual(1e-12 * Math.max(1, Math.abs(b)));
};

describe("OneCycle", () => {
  const r = rng(17);
  const cases: OneCycleParams[] = [];
  for (let i = 0; i < 12; i++) {
    const lo = r() * 1e-3;
    cases.push({
      cycle_min_lr: lo,
      cycle_max_lr: lo + r() * 1e-2,
      decay_lr_rate: i % 3 === 0 ? 0 : r() * 0.5,
      cycle_first_step_size: [1, 7, 13, 29][i % 4]!,
      cycle_second_step_size: i % 2 === 0 ? null : [3, 11, 17][i % 3]!,
      cycle_first_stair_count: i % 4 === 1 ? 3 : 0,
      cycle_second_stair_count: i % 4 === 1 ? (i % 8 === 1 ? 2 : null) : null,
      decay_step_size: i % 5 === 0 ? 0 : [1, 5, 7][i % 3]!,
      cycle_momentum: i % 6 !== 5,
      cycle_min_mom: 0.7 + r() * 0.1,
      cycle_max_mom: 0.85 + r() * 0.1,
      decay_mom_rate: i % 2 === 0 ? 0 : r() * 0.01,
    });
  }
  cases.forEach((p, i) => {
    test(`random case ${i}: lr and betas of every step over the cycle and the decay`, () => {
      const s = createScheduler({ type: "OneCycle", params: p }, 123);
      const len = p.cycle_first_step_size + (p.cycle_second_step_size ?? p.cycle_first_step_size);
      for (let it = -1; it < 2 * len + 9; it++) {
        expect(s.lastBatchIteration).toBe(it);
        const want = refOneCycle(p, it);
        close(s.getLr(), want.lr);
        const b = s.getBetas!();
        if (want.mom === null) expect(b).toBeNull();
        else {
          close(b![0], want.mom);
          expect(b![1]).toBe(0.99);
        }
        s.step();
      }
    });
  });

  test("the lr peaks at cycle_max_lr at the end of the rising half and returns to cycle_min_lr", () => {
    const p = resolveJobConfig({ ...DEFAULT_JOB, scheduler: { type: "OneCycle", params: { cycle_min_lr: 1e-4, cycle_max_lr: 1e-3, cycle_first_step_size: 5 } } }).config.scheduler!;
    const s = createScheduler(p, 0);
    const lrs: number[] = [];
    for (let i = 0; i < 12; i++, s.step()) lrs.push(s.getLr());
    close(lrs[0]!, 1e-4);
    close(lrs[5]!, 1e-3);
    close(lrs[10]!, 1e-4);
    close(lrs[11]!, 1e-4); // no decay by default: held
  });

  test("a resumed schedule continues exactly", () => {
    const p = cases[3]!;
    const a = createScheduler({ type: "OneCycle", params: p }, 0);
    for (let i = 0; i < 9; i++) a.step();
    const b = createScheduler({ type: "OneCycle", params: p }, 0);
    b.loadStateDict(a.stateDict());
    for (let i = 0; i < 20; i++, a.step(), b.step()) expect(b.getLr()).toBe(a.getLr());
  });
});

describe("LRRangeTest", () => {
  const r = rng(5);
  for (let i = 0; i < 8; i++) {
    const p: LRRangeTestParams = { lr_range_test_min_lr: r() * 1e-3, lr_range_test_step_size: [1, 3, 7, 13][i % 4]!, lr_range_test_step_rate: r() * 5, lr_range_test_staircase: i % 2 === 1 };
    test(`random case ${i}: lr of every step`, () => {
      const s = createScheduler({ type: "LRRangeTest", params: p }, 9);
      for (let it = -1; it < 40; it++, s.step()) {
        close(s.getLr(), refRange(p, it));
        expect(s.getBetas?.() ?? null).toBeNull();
      }
    });
  }
});

describe("job config", () => {
  test("DeepSpeed's names and defaults", () => {
    const oc = resolveJobConfig({ ...DEFAULT_JOB, scheduler: { type: "OneCycle", params: { cycle_min_lr: 1e-5, cycle_max_lr: 1e-3 } } }).config.scheduler!;
    expect(oc).toEqual({
      type: "OneCycle",
      params: {
        cycle_min_lr: 1e-5, cycle_max_lr: 1e-3, decay_lr_rate: 0, cycle_first_step_size: 2000, cycle_second_step_size: null, cycle_first_stair_count: 0,
        cycle_second_stair_count: null, decay_step_size: 0, cycle_momentum: true, cycle_min_mom: 0.8, cycle_max_mom: 0.9, decay_mom_rate: 0,
      },
    });
    const rt = resolveJobConfig({ ...DEFAULT_JOB, scheduler: { type: "LRRangeTest" } }).config.scheduler!;
    expect(rt).toEqual({ type: "LRRangeTest", params: { lr_range_test_min_lr: 1e-3, lr_range_test_step_size: 2000, lr_range_test_step_rate: 1, lr_range_test_staircase: false } });
  });

  test("OneCycle needs its lr bounds; a Warmup key is unknown to it", () => {
    expect(() => resolveJobConfig({ ...DEFAULT_JOB, scheduler: { type: "OneCycle", params: { cycle_max_lr: 1e-3 } } })).toThrow(/scheduler.params.cycle_min_lr/);
    expect(() => resolveJobConfig({ ...DEFAULT_JOB, scheduler: { type: "OneCycle", params: { cycle_min_lr: 0, cycle_max_lr: 1e-3, warmup_num_steps: 3 } } })).toThrow(/scheduler.params.warmup_num_steps: unknown key/);
  });
});

describe("refused optimizers", () => {
  for (const [name, why] of [["OneBitAdam", "compresses the gradient all-reduce"], ["ZeroOneAdam", "no compressed collectives"], ["OneBitLamb", "compressed (1-bit, error-feedback) communication"]] as const) {
    test(`${name} is refused saying why`, () => {
      expect(() => resolveJobConfig({ ...DEFAULT_JOB, optimizer: { type: name, params: { lr: 1e-3 } } })).toThrow(new RegExp(`optimizer.type: optimizer "${name}" is not available: .*${why.replace(/[()]/g, "\\$&")}.*; use "AdamW"`));
    });
  }
  test("adamw in any case still works", () => {
    expect(resolveJobConfig({ ...DEFAULT_JOB, optimizer: { type: "adamw" } }).config.optimizer.type).toBe("AdamW");
  });
});
