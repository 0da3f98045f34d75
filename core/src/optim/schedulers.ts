/**
 * DeepSpeed's learning-rate schedules, with DeepSpeed's formulas and step semantics
 * (deepspeed/runtime/lr_schedules.py: WarmupLR, WarmupDecayLR, WarmupCosineLR).
 *
 * Semantics (as in DeepSpeed): a schedule holds `last_batch_iteration`, starting at −1.
 * {@link LRScheduler.getLr} is the lr the *next* optimizer step uses; after each optimizer step
 * that is not skipped (fp16 overflow skips it), the engine calls {@link LRScheduler.step}, which
 * increments `last_batch_iteration`. So optimizer step 1 uses the lr at iteration −1, step 2 the
 * lr at iteration 0, and so on. With t = last_batch_iteration and W = max(2, warmup_num_steps):
 *
 *   warmup gamma γ(t) = ln(t + 1) / ln(W)     ("log")      or  t / W   ("linear"),  for 0 ≤ t < W
 *   WarmupLR:        lr = min + (max − min) · (t < W ? γ(t) : 1);          t < 0 → min
 *   WarmupDecayLR:   as WarmupLR but for t ≥ W: lr = min + (max − min) · max(0, (T − t) / max(1, T − W))
 *   WarmupCosineLR:  ratio = t < W ? r0 + (1 − r0) · γ(t)
 *                          : max(0, c + (1 − c) · (1 + cos(π · (t − W + 1) / (T − W))) / 2)
 *                    lr = base_lr · ratio;   t < 0 → 0   (DeepSpeed returns 0 before the first step)
 *
 * where min/max = warmup_min_lr/warmup_max_lr, T = total_num_steps, r0 = warmup_min_ratio,
 * c = cos_min_ratio, base_lr = optimizer lr. Like DeepSpeed's, the cosine is not clamped at T:
 * past T the ratio rises again. One deviation: when T ≤ W (the whole run is warmup; DeepSpeed only
 * warns) and t reaches W, DeepSpeed divides by zero or runs the cosine backwards; here the ratio is c.
 */
import type { SchedulerConfig, WarmupCosineLRParams, WarmupDecayLRParams, WarmupLRParams, WarmupType } from "../config/types.ts";
import { LRRangeTest, OneCycle } from "./cyclic-schedulers.ts";
import { IterationScheduler } from "./iteration-scheduler.ts";

/** Checkpointable state (DeepSpeed's `state_dict`). */
export interface SchedulerState {
  last_batch_iteration: number;
}

/** A learning-rate schedule stepped once per (non-skipped) optimizer step. */
export interface LRScheduler {
  /** "Constant" when no scheduler is configured. */
  readonly type: "Constant" | SchedulerConfig["type"];
  /** The lr the next optimizer step uses. */
  getLr(): number;
  /** Advance by one, or jump to `lastBatchIteration` when given (DeepSpeed's `step(last_batch_iteration)`). */
  step(lastBatchIteration?: number): void;
  /** Index of the last completed batch (−1 before the first step). */
  readonly lastBatchIteration: number;
  stateDict(): SchedulerState;
  /** Restore from {@link stateDict}; throws if the state is malformed. */
  loadStateDict(state: SchedulerState): void;
  /** Adam betas the next step uses when the schedule cycles momentum (OneCycle), else null/absent. */
  getBetas?(): [number, number] | null;
}

/** Warmup progress γ(t) ∈ [0, 1) for 0 ≤ t < W (DeepSpeed `_get_gamma` warmup branch). */
export function warmupGamma(t: number, warmupSteps: number, type: WarmupType): number {
  return type === "log" ? Math.log(t + 1) / Math.log(warmupSteps) : t / warmupSteps;
}

/** lr = base lr for every step (no `scheduler` section). */
export class ConstantLR extends IterationScheduler {
  readonly type = "Constant" as const;
  /** @param lr the optimizer lr (≥ 0). */
  constructor(private readonly lr: number) {
    super();
  }
  getLr(): number {
    return this.lr;
  }
}

/** DeepSpeed WarmupLR: warm up from warmup_min_lr to warmup_max_lr over warmup_num_steps, then hold. */
export class WarmupLR extends IterationScheduler {
  readonly type: "WarmupLR" | "WarmupDecayLR" = "WarmupLR";
  protected readonly warmup: number;
  constructor(protected readonly p: WarmupLRParams) {
    super();
    this.warmup = Math.max(2, p.warmup_num_steps);
  }
  protected gamma(): number {
    return this.iter < this.warmup ? warmupGamma(this.iter, this.warmup, this.p.warmup_type) : 1;
  }
  getLr(): number {
    if (this.iter < 0) return this.p.warmup_min_lr;
    return this.p.warmup_min_lr + (this.p.warmup_max_lr - this.p.warmup_min_lr) * this.gamma();
  }
}

/** DeepSpeed WarmupDecayLR: WarmupLR, then linear decay to 0 at total_num_steps. */
export class WarmupDecayLR extends WarmupLR {
  override readonly type = "WarmupDecayLR" as const;
  constructor(private readonly d: WarmupDecayLRParams) {
    super(d);
  }
  protected override gamma(): number {
    if (this.iter < this.warmup) return warmupGamma(this.iter, this.warmup, this.p.warmup_type);
    return Math.max(0, (this.d.total_num_steps - this.iter) / Math.max(1, this.d.total_num_steps - this.warmup));
  }
}

/** DeepSpeed WarmupCosineLR: ratio warmup from warmup_min_ratio to 1, then cosine to cos_min_ratio. */
export class WarmupCosineLR extends IterationScheduler {
  readonly type = "WarmupCosineLR" as const;
  private readonly warmup: number;
  /** @param baseLr the optimizer lr the ratio multiplies. */
  constructor(private readonly p: WarmupCosineLRParams, private readonly baseLr: number) {
    super();
    this.warmup = Math.max(2, p.warmup_num_steps);
  }
  /** The lr ratio (DeepSpeed `get_lr_ratio`); 0 before the first step. */
  getLrRatio(): number {
    const t = this.iter;
    if (t < 0) return 0;
    if (t < this.warmup) {
      const g = warmupGamma(t, this.warmup, this.p.warmup_type);
      return this.p.warmup_min_ratio + g * (1 - this.p.warmup_min_ratio);
    }
    const realLast = t - this.warmup + 1;
    const realTotal = this.p.total_num_steps - this.warmup;
    if (realTotal <= 0) return this.p.cos_min_ratio; // DeepSpeed divides by zero here; we end the schedule
    const cosine = (1 + Math.cos((Math.PI * realLast) / realTotal)) / 2;
    return Math.max(0, this.p.cos_min_ratio + (1 - this.p.cos_min_ratio) * cosine);
  }
  getLr(): number {
    return this.baseLr * this.getLrRatio();
  }
}

/**
 * Builds the schedule of a resolved `scheduler` section (null → {@link ConstantLR}).
 * @param baseLr `optimizer.params.lr` (WarmupCosineLR's base; ConstantLR's value).
 */
export function createScheduler(cfg: SchedulerConfig | null, baseLr: number): LRScheduler {
  if (cfg === null) return new ConstantLR(baseLr);
  switch (cfg.type) {
    case "WarmupLR":
      return new WarmupLR(cfg.params);
    case "WarmupDecayLR":
      return new WarmupDecayLR(cfg.params);
    case "WarmupCosineLR":
      return new WarmupCosineLR(cfg.params, baseLr);
    case "OneCycle":
      return new OneCycle(cfg.params);
    case "LRRangeTest":
      return new LRRangeTest(cfg.params);
  }
}
