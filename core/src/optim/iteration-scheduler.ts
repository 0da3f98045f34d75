/**
 * What every learning-rate schedule shares (schedulers.ts, cyclic-schedulers.ts): DeepSpeed's
 * `last_batch_iteration` t, −1 before the first step, advanced by `step()` after each applied
 * optimizer step or set by `step(t)`, and saved/restored as `{last_batch_iteration}`.
 */
import type { LRScheduler, SchedulerState } from "./schedulers.ts";

/** A schedule whose lr is a function of `last_batch_iteration` alone; subclasses give `getLr`. */
export abstract class IterationScheduler implements LRScheduler {
  abstract readonly type: LRScheduler["type"];
  protected iter = -1;
  get lastBatchIteration(): number {
    return this.iter;
  }
  abstract getLr(): number;
  /** Advance by one, or jump to `lastBatchIteration`. @throws RangeError unless an integer ≥ −1. */
  step(lastBatchIteration?: number): void {
    const next = lastBatchIteration ?? this.iter + 1;
    if (!Number.isInteger(next) || next < -1) throw new RangeError(`${this.type}.step: last_batch_iteration must be an integer >= -1, got ${next}`);
    this.iter = next;
  }
  stateDict(): SchedulerState {
    return { last_batch_iteration: this.iter };
  }
  /** Restore from {@link stateDict}. @throws naming the schedule unless `{last_batch_iteration: integer ≥ −1}`. */
  loadStateDict(state: SchedulerState): void {
    const v = state?.last_batch_iteration;
    if (typeof v !== "number" || !Number.isInteger(v) || v < -1) throw new Error(`${this.type}.loadStateDict: expected {last_batch_iteration: integer >= -1}, got ${JSON.stringify(state)}`);
    this.iter = v;
  }
}
