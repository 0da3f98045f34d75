/**
 * Sleeping, synchronously and asynchronously, the same on Bun and Deno (standard APIs only:
 * `Atomics.wait` on a private SharedArrayBuffer, `setTimeout`).
 */

const cell = new Int32Array(new SharedArrayBuffer(4));

/** Block this thread for `ms` milliseconds (≥ 0; fractions allowed). Nothing else on the thread
 * runs meanwhile (like Bun.sleepSync). @throws RangeError on a negative or non-finite `ms`. */
export function sleepSync(ms: number): void {
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`sleepSync: ms must be a finite number ≥ 0, got ${ms}`);
  Atomics.wait(cell, 0, 0, ms);
}

/** Resolve after `ms` milliseconds (a timer; the thread keeps running other work). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
