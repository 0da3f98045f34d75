/**
 * The handle a collective returns (communicator.ts {@link Work}): issued now, completed later.
 *
 * Model: torch.distributed's `Work` (`wait()`, `is_completed()`) as FSDP2 uses it to issue the next
 * unit's all_gather before computing the current one. Issuing fixes the collective's place in this
 * rank's order of collectives (the order every member must agree on); completion happens on the
 * transport's progress thread (progress/) or, on an in-thread transport, before the call returns.
 *
 * A handle is also a `PromiseLike`: `await comm.allReduce(x)` issues and waits in one expression,
 * as before the contract returned handles. An error of the collective (timeout, mismatch, abort, bad
 * arguments) rejects `wait()`; it is never thrown by the issuing call itself.
 */

import type { Work } from "./communicator.ts";

/** A {@link Work} over a promise of its value, which knows whether it has settled. */
export class CommWork<T> implements Work<T> {
  private done = false;
  private failed = false;
  private readonly p: Promise<T>;
  /** Nominal bytes this rank sends in the collective (stats.ts), known once it has started. */
  sentBytes = 0;
  /** performance.now() of the first wait()/then, or -1 while nobody has waited. */
  private waitedAt = -1;

  /**
   * Wrap `p` (the collective's completion). Its rejection is left for `wait()` to report.
   * `onSettle` runs once when `p` settles, with the milliseconds a caller has been blocked waiting
   * (from the first wait to completion; 0 when nobody waited before it completed).
   */
  constructor(p: Promise<T>, onSettle?: (blockedMs: number) => void) {
    const settle = () => {
      this.done = true;
      onSettle?.(this.waitedAt < 0 ? 0 : performance.now() - this.waitedAt);
    };
    this.p = p.then(
      (v) => {
        settle();
        return v;
      },
      (e: unknown) => {
        this.failed = true;
        settle();
        throw e;
      },
    );
  }

  /** A handle that is already complete with `value`. */
  static completed<T>(value: T): CommWork<T> {
    const w = new CommWork(Promise.resolve(value));
    w.done = true;
    return w;
  }

  /** A handle that is already complete with error `e`. */
  static failed<T>(e: unknown): CommWork<T> {
    const w = new CommWork<T>(Promise.reject(e));
    w.done = true;
    w.failed = true;
    return w;
  }

  /** See {@link Work.wait}. */
  wait(): Promise<T> {
    if (this.waitedAt < 0 && !this.done) this.waitedAt = performance.now();
    return this.p;
  }

  /** See {@link Work.isCompleted}. */
  isCompleted(): boolean {
    return this.done;
  }

  /** Whether the collective completed with an error (false while it is in flight). */
  isFailed(): boolean {
    return this.failed;
  }

  /** Awaiting the handle waits it. */
  then<R1 = T, R2 = never>(onOk?: ((v: T) => R1 | PromiseLike<R1>) | null, onErr?: ((e: unknown) => R2 | PromiseLike<R2>) | null): Promise<R1 | R2> {
    return this.wait().then(onOk, onErr);
  }
}
