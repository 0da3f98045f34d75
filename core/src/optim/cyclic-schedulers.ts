/**
 * DeepSpeed's OneCycle and LRRangeTest schedules (deepspeed/runtime/lr_schedules.py), with
 * DeepSpeed's parameter names and step semantics: the schedule holds `last_batch_iteration` t
 * (−1 before the first step), `getLr()` is the lr the next optimizer step uses, and the engine calls
 * `step()` after every applied optimizer step (schedulers.ts's module comment).
 *
 * LRRangeTest (Smith 2017, "Cyclical Learning Rates"): with s = lr_range_test_step_size,
 *   interval(t) = (t + 1) / s, or floor((t + 1) / s) with lr_range_test_staircase,
 *   lr = lr_range_test_min_lr · (1 + lr_range_test_step_rate · interval(t)).
 *
 * OneCycle (Smith 2018, "A disciplined approach to neural network hyper-parameters", 1cycle): with
 * S1 = cycle_first_step_size, S2 = cycle_second_step_size (default S1), T = S1 + S2, r = S1 / T,
 * b = t + 1, x = 1 + b/T − floor(1 + b/T):
 *   scale = x / r when x ≤ r, else (x − 1) / (r − 1); with a stair count n > 0 of that half, scale
 *   = floor(position) / n where position = (b mod T) · n / S1 in the first half, (T − b mod T) · n / S2 in the second;
 *   t < T:  lr = cycle_min_lr + (cycle_max_lr − cycle_min_lr) · scale,
 *           β1 = cycle_max_mom − (cycle_max_mom − cycle_min_mom) · scale (when cycle_momentum);
 *   t ≥ T:  lr = cycle_min_lr / (1 + decay_lr_rate · (t − T + 1) / decay_step_size),
 *           β1 = cycle_max_mom · (1 + decay_mom_rate · (t − T + 1) / decay_step_size);
 *           a decay_step_size of 0 (or a rate of 0) holds cycle_min_lr / cycle_max_mom.
 * As in DeepSpeed, cycling momentum sets the optimizer's betas to (β1, 0.99), and before the first
 * step (t = −1) the lr is cycle_min_lr and β1 is cycle_min_mom.
 */
import type { LRRangeTestParams, OneCycleParams } from "../config/types.ts";
import { IterationScheduler } from "./iteration-scheduler.ts";

/** DeepSpeed LRRangeTest (see the module comment). */
export class LRRangeTest extends IterationScheduler {
  readonly type = "LRRangeTest" as const;
  constructor(private readonly p: LRRangeTestParams) {
    super();
  }
  getLr(): number {
    const b = (this.iter + 1) / this.p.lr_range_test_step_size;
    const interval = this.p.lr_range_test_staircase ? Math.floor(b) : b;
    return this.p.lr_range_test_min_lr * (1 + this.p.lr_range_test_step_rate * interval);
  }
  /** No momentum schedule: the optimizer's betas hold. */
  getBetas(): null {
    return null;
  }
}

/** DeepSpeed OneCycle (see the module comment). */
export class OneCycle extends IterationScheduler {
  readonly type = "OneCycle" as const;
  private readonly s1: number;
  private readonly s2: number;
  private readonly total: number;
  private readonly ratio: number;
  private readonly stairs2: number;
  constructor(private readonly p: OneCycleParams) {
    super();
    this.s1 = p.cycle_first_step_size;
    this.s2 = p.cycle_second_step_size ?? p.cycle_first_step_size;
    this.total = this.s1 + this.s2;
    this.ratio = this.s1 / this.total;
    this.stairs2 = p.cycle_second_stair_count ?? p.cycle_first_stair_count;
  }
  /** The cycle position scale ∈ [0, 1] at the current iteration. */
  private scale(): number {
    const b = this.iter + 1;
    const cycle = Math.floor(1 + b / this.total);
    const x = 1 + b / this.total - cycle;
    let scale: number;
    let stairs: number;
    if (x <= this.ratio) {
      scale = x / this.ratio;
      stairs = this.p.cycle_first_stair_count;
    } else {
      scale = (x - 1) / (this.ratio - 1);
      stairs = this.stairs2;
    }
    if (stairs > 0) {
      const it = b % this.total;
      const pos = it <= this.s1 ? (it * stairs) / this.s1 : ((this.total - it) * stairs) / this.s2;
      scale = Math.floor(pos) / stairs;
    }
    return scale;
  }
  private decaying(): boolean {
    return this.p.decay_step_size === 0;
  }
  getLr(): number {
    const p = this.p;
    if (this.iter < this.total) return p.cycle_min_lr + (p.cycle_max_lr - p.cycle_min_lr) * this.scale();
    if (this.decaying() || p.decay_lr_rate === 0) return p.cycle_min_lr;
    return p.cycle_min_lr / (1 + (p.decay_lr_rate * (this.iter - this.total + 1)) / p.decay_step_size);
  }
  /** Adam betas the next step uses when `cycle_momentum` (DeepSpeed sets (β1, 0.99)), else null. */
  getBetas(): [number, number] | null {
    const p = this.p;
    if (!p.cycle_momentum) return null;
    if (this.iter < 0) return [p.cycle_min_mom, 0.99];
    if (this.iter < this.total) return [p.cycle_max_mom - (p.cycle_max_mom - p.cycle_min_mom) * this.scale(), 0.99];
    if (this.decaying() || p.decay_mom_rate === 0) return [p.cycle_max_mom, 0.99];
    return [p.cycle_max_mom * (1 + (p.decay_mom_rate * (this.iter - this.total + 1)) / p.decay_step_size), 0.99];
  }
}
