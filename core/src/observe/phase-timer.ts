/**
 * Wall-clock breakdown of one training step by phase (`wall_clock_breakdown`), with EXCLUSIVE
 * times: a phase entered inside another (a ZeRO-3 gather inside the forward, an all_to_all inside
 * a MoE layer, a device→host read inside the optimizer step) is charged to the inner phase only,
 * so the phases of a step add up to the step's wall time exactly (`other` takes what no phase
 * claimed). This is DeepSpeed's `wall_clock_breakdown` timer set (forward, backward, allreduce,
 * step; deepspeed/utils/timer.py) made exclusive so that the shares are those of one step.
 *
 * Phases:
 * - `forward` / `backward`: compute of the model's forward and backward (what nothing else claims).
 * - `reduce`: gradient reduction (the reduce hook: `gradReady` and `finish`).
 * - `optimizer`: the optimizer step (clipping, AdamW, the stage 1/2 all_gather of updated shards).
 * - `gather`: ZeRO-3 parameter gathers and releases (the gather hook, `endStep` included).
 * - `a2a_dispatch` / `a2a_combine`: MoE all_to_all of the dispatcher's `dispatch` / `combine`,
 *   forward and (by the tape's reverse order) backward.
 * - `transfer`: host↔device copies (`Backend.read`/`write`) outside any other phase's own code.
 * - `other`: the rest of the step (loss all_reduce, bookkeeping).
 * Units: milliseconds.
 */

/** Phase names in report order. */
export const PHASES = ["forward", "backward", "reduce", "optimizer", "gather", "a2a_dispatch", "a2a_combine", "transfer", "other"] as const;
export type Phase = (typeof PHASES)[number];

/** Exclusive milliseconds per phase of one step, and the step's wall time. */
export interface StepTimes {
  /** Wall time of the step, ms (= Σ phases). */
  totalMs: number;
  phases: Record<Phase, number>;
}

/** A zeroed phase table. */
export function emptyPhases(): Record<Phase, number> {
  const t = {} as Record<Phase, number>;
  for (const p of PHASES) t[p] = 0;
  return t;
}

/**
 * Exclusive phase timer (see the module comment). Outside a step (`begin`…`end`) every call is
 * a no-op. Not re-entrant across steps; phases may nest to any depth, and an `exit` that does not
 * match the innermost phase (interleaved async work) removes its own entry, so time is never
 * counted twice and never lost.
 */
export class PhaseTimer {
  private stack: { phase: Phase; id: number }[] = [];
  private acc = emptyPhases();
  private last = 0;
  private start = 0;
  private nextId = 1;
  private active = false;
  /** Labels of the forward all_to_all calls of the current micro-batch, for their backward. */
  readonly a2aLabels: Phase[] = [];
  /** Clock in ms (replaceable in tests). */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /** True between {@link begin} and {@link end}. */
  get running(): boolean {
    return this.active;
  }

  /** The innermost phase now ("other" when none). */
  get current(): Phase {
    return this.stack.length ? this.stack[this.stack.length - 1]!.phase : "other";
  }

  /** Start a step. */
  begin(): void {
    this.acc = emptyPhases();
    this.stack = [];
    this.a2aLabels.length = 0;
    this.start = this.last = this.now();
    this.active = true;
  }

  private charge(): void {
    const t = this.now();
    this.acc[this.current] += t - this.last;
    this.last = t;
  }

  /** Enter `phase`; returns a token for {@link exit}. */
  enter(phase: Phase): number {
    if (!this.active) return 0;
    this.charge();
    const id = this.nextId++;
    this.stack.push({ phase, id });
    return id;
  }

  /** Leave the phase entered with `token`. */
  exit(token: number): void {
    if (!this.active || token === 0) return;
    this.charge();
    for (let i = this.stack.length - 1; i >= 0; i--) {
      if (this.stack[i]!.id === token) {
        this.stack.splice(i, 1);
        break;
      }
    }
  }

  /** Run `fn` inside `phase` (sync or async). */
  time<T>(phase: Phase, fn: () => T): T {
    const tok = this.enter(phase);
    let r: T;
    try {
      r = fn();
    } catch (e) {
      this.exit(tok);
      throw e;
    }
    if (r instanceof Promise) return r.finally(() => this.exit(tok)) as T;
    this.exit(tok);
    return r;
  }

  /** End the step: its wall time and exclusive phase times (Σ phases = totalMs). */
  end(): StepTimes {
    if (!this.active) return { totalMs: 0, phases: emptyPhases() };
    this.stack = [];
    this.charge();
    this.active = false;
    return { totalMs: this.last - this.start, phases: { ...this.acc } };
  }
}
