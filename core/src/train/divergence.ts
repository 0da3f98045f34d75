/**
 * Divergence policy of the training loop (job key `max_bad_steps`, docs/config.md).
 *
 * A step is *bad* when its loss is not finite, or when it did not move the weights for a reason
 * the run cannot fix by itself: skipped for inf/NaN gradients without a dynamic loss scaler (fp32,
 * bf16, or fp16 with a static `loss_scale`), or applied with a gradient norm of exactly 0 (e.g. a
 * static fp16 scale so small that every gradient underflows). Under dynamic loss scaling a skipped
 * step with a finite loss is the scaler searching for its scale (DeepSpeed's rule, which ends the
 * run itself at `min_loss_scale`), so it is not counted.
 *
 * After `max_bad_steps` consecutive bad steps the loop stops with a {@link DivergenceError}
 * (exit status 4 from `bun run train`) naming the step, the last finite loss and what to try. From
 * the first non-finite loss of a streak on, no checkpoint is written (the weights may already be
 * damaged), so the newest checkpoint — the one `latest` names and `keep_last` never prunes, since
 * pruning only happens when a newer one is saved — is the last one written before divergence.
 * Every rank sees the same (all-reduced) loss and step result, so every rank takes the same
 * decision and the collectives of the save stay matched.
 */
import type { StepResult } from "../engine/engine.ts";

/** Exit status of `bun run train` for a run stopped by this policy. */
export const EXIT_DIVERGED = 4;

/** The run diverged (see the module comment); the message says where and what to try. */
export class DivergenceError extends Error {
  override readonly name = "DivergenceError";
  constructor(
    /** Step at which the run stopped. */
    readonly step: number,
    /** Last finite loss and its step, or null when no step had one. */
    readonly lastFinite: { step: number; loss: number } | null,
    message: string,
  ) {
    super(message);
  }
}

/** Why a step counts as bad, or null for a good step. */
export function badStepReason(r: StepResult, dynamicScaler: boolean): string | null {
  if (!Number.isFinite(r.loss)) return `loss ${r.loss}`;
  if (r.skipped && !dynamicScaler) return `step skipped: gradient norm ${r.gradNorm}`;
  if (!r.skipped && r.gradNorm === 0) return `gradient norm 0 (no update)`;
  return null;
}

/** Consecutive-bad-step counter of one run (see the module comment). */
export class DivergenceWatch {
  private streak = 0;
  private streakStart = 0;
  private nonFiniteInStreak = false;
  private lastFinite: { step: number; loss: number } | null = null;
  private firstReason = "";

  /**
   * @param maxBadSteps stop after this many consecutive bad steps (0 = never stop)
   * @param dynamicScaler fp16 with dynamic loss scaling (skips are the scaler's business)
   * @param hints what the job could change, for the message (e.g. the lr and precision in use)
   */
  constructor(
    readonly maxBadSteps: number,
    private readonly dynamicScaler: boolean,
    private readonly hints: string,
  ) {}

  /**
   * Record step `step`'s result. Returns a warning line the first time a streak starts (or null).
   * @throws DivergenceError when the streak reaches `maxBadSteps`.
   */
  observe(step: number, r: StepResult): string | null {
    if (Number.isFinite(r.loss)) this.lastFinite = { step, loss: r.loss };
    const why = badStepReason(r, this.dynamicScaler);
    if (why === null) {
      this.streak = 0;
      this.nonFiniteInStreak = false;
      return null;
    }
    if (this.streak === 0) {
      this.streakStart = step;
      this.firstReason = why;
    }
    this.streak++;
    if (!Number.isFinite(r.loss)) this.nonFiniteInStreak = true;
    if (this.maxBadSteps > 0 && this.streak >= this.maxBadSteps) throw this.error(step);
    return this.streak === 1 ? `warning: step ${step}: ${why}; the run stops after ${this.maxBadSteps > 0 ? this.maxBadSteps : "∞"} consecutive bad steps (max_bad_steps)` : null;
  }

  /** True while no checkpoint may be written: the current streak holds a non-finite loss. */
  get holdCheckpoints(): boolean {
    return this.nonFiniteInStreak;
  }

  /** The current streak (0 after a good step). */
  get badSteps(): number {
    return this.streak;
  }

  /** The error for a run that stops (or ends) at `step` inside a streak. */
  error(step: number): DivergenceError {
    const last = this.lastFinite ? `last finite loss ${this.lastFinite.loss.toFixed(4)} at step ${this.lastFinite.step}` : "no finite loss yet";
    const msg =
      `training diverged: ${this.streak} consecutive bad steps (${this.streakStart}–${step}; first: ${this.firstReason}), ${last}. ` +
      `No checkpoint was written after the first non-finite loss. Try: a lower learning rate or a longer warmup, gradient_clipping (e.g. 1.0), ` +
      `bf16 or dynamic fp16 loss scaling (fp16.loss_scale 0) instead of a static scale${this.hints ? ` (${this.hints})` : ""}; resume from the last checkpoint with --resume; ` +
      `max_bad_steps sets how many bad steps are tolerated (0 = never stop)`;
    return new DivergenceError(step, this.lastFinite, msg);
  }
}
