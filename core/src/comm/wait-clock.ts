/**
 * Pause-proof waiting time for collective timeouts, shared by the `local` and `mpi` transports.
 *
 * A timeout must measure how long a rank waited for its peers while the job was running, not wall
 * time: a job suspended as a whole (Ctrl-Z, SIGSTOP of every rank and the launcher, a paused VM)
 * for longer than the timeout would otherwise die on SIGCONT blaming a healthy rank (issue 18 for
 * `local`, issue 32 for `mpi`). A waiting loop calls {@link WaitClock.tick} once per poll or wait
 * slice; each call adds the time since the previous one, capped at {@link MAX_SLICE_CREDIT_MS}.
 * A poll or slice is short (at most a 250 ms wait, or a 1 ms sleep), so an interval longer than
 * the cap means the process was not running (suspended, or not scheduled) and adds only the cap.
 * One stuck peer is still named after about the timeout of real waiting.
 */

/** Most waiting time one interval may add, ms: a wait slice (≤ 250 ms) plus scheduling delay on a
 * busy machine. */
export const MAX_SLICE_CREDIT_MS = 500;

/** Waiting time with suspensions left out (module comment). */
export class WaitClock {
  private last = -1;
  private waitedMs = 0;

  /** @param capMs the most one interval adds (default {@link MAX_SLICE_CREDIT_MS}). */
  constructor(private readonly capMs = MAX_SLICE_CREDIT_MS) {}

  /** Start over (progress was made: the deadline measures time without progress). */
  reset(): void {
    this.last = -1;
    this.waitedMs = 0;
  }

  /** Count the interval since the previous tick (capped); returns the waiting time so far, ms. */
  tick(): number {
    const now = performance.now();
    if (this.last >= 0) this.waitedMs += Math.min(now - this.last, this.capMs);
    this.last = now;
    return this.waitedMs;
  }
}
