/**
 * The per-unit "reduction done" event of a step (the offload hook's `gradReduced`): a unit's owned,
 * summed gradient (`UnitHandle.ownedGrad()`) is final once the reduction of its last micro-batch's
 * gradient has been added in. The reduce hook says so through `HookContext.gradReduced(unit)` — core's
 * reduction helpers (grad-reduce.ts) do it for every reduce hook built on them — and the engine calls
 * {@link GradReducedEvents.completeStep} right after `reduce.finish`, which announces every trainable
 * unit that was not announced yet (a reduce hook that never announces still gives every unit its
 * event, only later). So each trainable unit this rank holds gets exactly one event per step, before
 * the gradient norm and the optimizer step. ZeRO-Offload (Ren et al., USENIX ATC'21, §4.2) copies
 * each gradient shard to the host at this point, overlapped with the rest of backward.
 */
import type { UnitHandle } from "./plugin-context.ts";

/** Dispatches "unit's gradient is final for this step" once per trainable unit per step. */
export class GradReducedEvents {
  private readonly seen = new Set<UnitHandle>();
  private listener: ((unit: UnitHandle) => void) | null = null;

  /** Send every event to `fn` (the offload hook's `gradReduced`); null: nobody listens. */
  connect(fn: ((unit: UnitHandle) => void) | null): void {
    this.listener = fn;
  }

  /** `unit`'s owned gradient is final for this step (repeats within a step and frozen units are
   * ignored). */
  announce(unit: UnitHandle): void {
    if (!unit.trainable || this.seen.has(unit)) return;
    this.seen.add(unit);
    this.listener?.(unit);
  }

  /** Start of a step: forget what the previous (possibly failed) step announced. */
  reset(): void {
    this.seen.clear();
  }

  /** After `reduce.finish`: announce every trainable unit of `units` not announced yet, then reset. */
  completeStep(units: readonly UnitHandle[]): void {
    for (const u of units) this.announce(u);
    this.seen.clear();
  }
}
