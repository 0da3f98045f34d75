/**
 * fp16 loss scaling with DeepSpeed's semantics (deepspeed/runtime/fp16/loss_scaler.py:
 * LossScaler, DynamicLossScaler; config keys docs/domain.md §3).
 *
 * Use per optimizer step: multiply the loss by {@link LossScaler.lossScale} before backward; after
 * backward, check the gradients for inf/NaN (all ranks agree on one flag); call
 * {@link LossScaler.update}(overflow); when `overflow`, skip the optimizer step (and the lr
 * schedule step), else unscale gradients by 1/scale (folded into AdamW's `gradScale`).
 *
 * Dynamic rule, with scale s, hysteresis h (starts at `hysteresis`), iteration i and the iteration
 * of the last overflow o (starts at −1):
 *  - overflow: if `hysteresis` == 1 or h == 1 → s = max(s / 2, min_loss_scale) (error instead if s is
 *    already min_loss_scale and `raiseErrorAtMinScale`); else h −= 1. Then o = i.
 *  - no overflow: if `consecutive_hysteresis`, h = `hysteresis`. If (i − o) % window == 0 →
 *    h = `hysteresis` (when not consecutive) and s = 2s.
 *  - i += 1 in both cases.
 * So after an overflow the scale doubles after `loss_scale_window` clean steps.
 */
import type { Fp16Config } from "../config/types.ts";

/** Checkpointable scaler state. */
export interface LossScalerState {
  cur_scale: number;
  cur_iter: number;
  last_overflow_iter: number;
  cur_hysteresis: number;
  /** Steps skipped because of overflow so far (DeepSpeed's `skipped_steps`). */
  overflow_count: number;
}

/** Thrown when an overflow happens at the minimum dynamic scale (DeepSpeed exits the run then). */
export class LossScaleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LossScaleError";
  }
}

/** Common interface of static and dynamic scalers. */
export interface LossScaler {
  readonly dynamic: boolean;
  /** Current scale the loss is multiplied by. */
  readonly lossScale: number;
  /** Overflow steps seen so far. */
  readonly overflowCount: number;
  /** Record one optimizer step's overflow flag and adjust the scale. */
  update(overflow: boolean): void;
  stateDict(): LossScalerState;
  loadStateDict(state: LossScalerState): void;
}

/** Options of {@link DynamicLossScaler} (DeepSpeed names in parentheses). */
export interface DynamicLossScalerOptions {
  /** Initial scale (init_scale = 2^initial_scale_power). */
  initScale: number;
  /** Factor for raising/lowering (scale_factor, 2). */
  scaleFactor?: number;
  /** Clean steps before raising (scale_window = loss_scale_window). */
  scaleWindow: number;
  /** Floor (min_scale = min_loss_scale). */
  minScale: number;
  /** Overflows tolerated before lowering (delayed_shift = hysteresis). */
  delayedShift: number;
  /** Refill hysteresis on every clean step (consecutive_hysteresis). */
  consecutiveHysteresis?: boolean;
  /** Throw when overflowing at the floor (raise_error_at_min_scale, default true). */
  raiseErrorAtMinScale?: boolean;
}

function checkState(s: LossScalerState, who: string): void {
  const ok =
    s &&
    typeof s.cur_scale === "number" && s.cur_scale > 0 &&
    Number.isInteger(s.cur_iter) && Number.isInteger(s.last_overflow_iter) &&
    Number.isInteger(s.cur_hysteresis) && Number.isInteger(s.overflow_count);
  if (!ok) throw new Error(`${who}.loadStateDict: malformed state ${JSON.stringify(s)}`);
}

/** A fixed scale (fp16.loss_scale > 0, or 1 when fp16 is off); overflow steps are still counted. */
export class StaticLossScaler implements LossScaler {
  readonly dynamic = false;
  private count = 0;
  private iter = 0;
  /** @param scale the fixed loss scale (> 0). */
  constructor(private scale: number) {
    if (!(scale > 0)) throw new RangeError(`StaticLossScaler: scale must be > 0, got ${scale}`);
  }
  get lossScale(): number {
    return this.scale;
  }
  get overflowCount(): number {
    return this.count;
  }
  update(overflow: boolean): void {
    if (overflow) this.count++;
    this.iter++;
  }
  stateDict(): LossScalerState {
    return { cur_scale: this.scale, cur_iter: this.iter, last_overflow_iter: -1, cur_hysteresis: 1, overflow_count: this.count };
  }
  loadStateDict(s: LossScalerState): void {
    checkState(s, "StaticLossScaler");
    this.scale = s.cur_scale;
    this.iter = s.cur_iter;
    this.count = s.overflow_count;
  }
}

/** DeepSpeed's DynamicLossScaler (see the module comment for the rule). */
export class DynamicLossScaler implements LossScaler {
  readonly dynamic = true;
  private curScale: number;
  private curIter = 0;
  private lastOverflowIter = -1;
  private curHysteresis: number;
  private count = 0;
  private readonly scaleFactor: number;
  private readonly consecutive: boolean;
  private readonly raiseAtMin: boolean;

  constructor(private readonly o: DynamicLossScalerOptions) {
    if (!(o.initScale > 0)) throw new RangeError(`DynamicLossScaler: initScale must be > 0, got ${o.initScale}`);
    if (!(o.minScale > 0)) throw new RangeError(`DynamicLossScaler: minScale must be > 0, got ${o.minScale}`);
    if (!Number.isInteger(o.scaleWindow) || o.scaleWindow < 1) throw new RangeError(`DynamicLossScaler: scaleWindow must be an integer >= 1, got ${o.scaleWindow}`);
    if (!Number.isInteger(o.delayedShift) || o.delayedShift < 1) throw new RangeError(`DynamicLossScaler: delayedShift (hysteresis) must be an integer >= 1, got ${o.delayedShift}`);
    this.curScale = o.initScale;
    this.curHysteresis = o.delayedShift;
    this.scaleFactor = o.scaleFactor ?? 2;
    this.consecutive = o.consecutiveHysteresis ?? false;
    this.raiseAtMin = o.raiseErrorAtMinScale ?? true;
  }
  get lossScale(): number {
    return this.curScale;
  }
  get overflowCount(): number {
    return this.count;
  }
  /** Hysteresis left before the next overflow halves the scale. */
  get hysteresis(): number {
    return this.curHysteresis;
  }
  /** @throws LossScaleError on overflow at the floor when raiseErrorAtMinScale. */
  update(overflow: boolean): void {
    if (overflow) {
      this.count++;
      if (this.o.delayedShift === 1 || this.curHysteresis === 1) {
        if (this.curScale === this.o.minScale && this.raiseAtMin) {
          throw new LossScaleError(
            `fp16 loss scale is already at min_loss_scale ${this.o.minScale} and the gradients still overflow (inf/NaN), so the step cannot be taken: ` +
              `lower fp16.min_loss_scale (e.g. ${Math.max(this.o.minScale / 2 ** 16, 2 ** -24)}) or initial_scale_power, or train in bf16 (bf16.enabled true, no loss scaling); ` +
              `if even small scales overflow the gradients themselves are inf/NaN: lower the learning rate, set gradient_clipping (e.g. 1.0), check the data`,
          );
        }
        this.curScale = Math.max(this.curScale / this.scaleFactor, this.o.minScale);
      } else {
        this.curHysteresis -= 1;
      }
      this.lastOverflowIter = this.curIter;
    } else {
      if (this.consecutive) this.curHysteresis = this.o.delayedShift;
      if ((this.curIter - this.lastOverflowIter) % this.o.scaleWindow === 0) {
        if (!this.consecutive) this.curHysteresis = this.o.delayedShift;
        this.curScale *= this.scaleFactor;
      }
    }
    this.curIter += 1;
  }
  stateDict(): LossScalerState {
    return {
      cur_scale: this.curScale,
      cur_iter: this.curIter,
      last_overflow_iter: this.lastOverflowIter,
      cur_hysteresis: this.curHysteresis,
      overflow_count: this.count,
    };
  }
  loadStateDict(s: LossScalerState): void {
    checkState(s, "DynamicLossScaler");
    this.curScale = s.cur_scale;
    this.curIter = s.cur_iter;
    this.lastOverflowIter = s.last_overflow_iter;
    this.curHysteresis = s.cur_hysteresis;
    this.count = s.overflow_count;
  }
}

/**
 * The scaler of a resolved `fp16` section: dynamic when enabled with loss_scale 0, static at
 * loss_scale when enabled with loss_scale > 0, static 1 when fp16 is off (bf16/fp32 need no scaling).
 */
export function createLossScaler(fp16: Fp16Config): LossScaler {
  if (!fp16.enabled) return new StaticLossScaler(1);
  if (fp16.loss_scale > 0) return new StaticLossScaler(fp16.loss_scale);
  return new DynamicLossScaler({
    initScale: 2 ** fp16.initial_scale_power,
    scaleWindow: fp16.loss_scale_window,
    minScale: fp16.min_loss_scale,
    delayedShift: fp16.hysteresis,
    consecutiveHysteresis: fp16.consecutive_hysteresis,
  });
}
