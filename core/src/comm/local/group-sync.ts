/**
 * Group registry and barrier of the `local` transport, on the shared control block (memory.ts).
 *
 * A group is identified by its member set: the first rank to create it claims a registry entry
 * (compare-and-swap on the entry state), later creators of the same set find it. The barrier is
 * epoch based: each member keeps a private count of barriers it has entered on the group; entering
 * barrier k stores k in `arrive[me]`, increments and notifies the group's bell word, and waits
 * (Atomics.wait on the bell, in slices so the abort word is re-checked) until every member's
 * `arrive` has reached k. The ranks whose `arrive` is behind are the ones named by a timeout; a
 * missing rank whose FINISHED flag is set (its entry returned) fails the wait at once.
 *
 * Pause-proof timeout: the timeout counts *waiting* time, not wall time. Each wait slice adds the
 * time it took, capped at {@link MAX_SLICE_CREDIT_MS}; a slice that took longer (the whole process
 * was suspended — Ctrl-Z, SIGSTOP, a paused VM — or not scheduled) adds only the cap. So a job
 * suspended for longer than the timeout resumes and carries on, while one stuck rank is still
 * named after about `timeoutMs` of waiting (issue 18: `performance.now()` counted the suspension
 * and the job died on SIGCONT blaming a healthy rank). The waiting time also restarts from zero
 * whenever the group's bell moves (another member arrived): the deadline measures time without
 * progress.
 */

import { CommAbortedError, CommPeerFinishedError, CommTimeoutError } from "../errors.ts";
import { MAX_SLICE_CREDIT_MS } from "../wait-clock.ts";
import { ABORT, FINISHED_WORD, HEADER_BASE, HEADER_WORDS, MAX_GROUPS, controlLayout, type ControlLayout } from "./memory.ts";

/** Longest single Atomics.wait, ms: bounds how stale an abort can be even without a notify. */
const WAIT_SLICE_MS = 250;
/** Most waiting time one slice may add to the timeout's count, ms (see the module comment; the
 * mpi transport uses the same rule, comm/wait-clock.ts). */
export { MAX_SLICE_CREDIT_MS };
/** Spins on the bell before blocking (cheap when a peer is a few microseconds behind). */
const SPINS = 64;

/** One rank's handle on one registry entry. Several Group objects with the same ranks share it. */
export class GroupSync {
  /** Barriers this rank has entered on the group (wraps at 2³¹; compared modulo 2³²). */
  private epoch = 0;
  private readonly bell: number;
  private readonly arriveBase: number;

  constructor(
    private readonly ctl: Int32Array,
    readonly entry: number,
    readonly ranks: readonly number[],
    private readonly me: number,
    layout: ControlLayout,
  ) {
    const base = layout.registryBase + entry * layout.entryWords;
    this.bell = base + 1;
    this.arriveBase = base + 2 + layout.maskWords;
  }

  /**
   * Wait until every member has entered this barrier. Throws {@link CommAbortedError} when the job
   * is aborted, {@link CommPeerFinishedError} when a missing member has already returned from its
   * entry function, and {@link CommTimeoutError} (naming the missing world ranks) after `timeoutMs`.
   * `op`/`groupName` only label errors.
   */
  arriveAndWait(op: string, groupName: string, timeoutMs: number): void {
    const ctl = this.ctl;
    const epoch = (this.epoch = (this.epoch + 1) | 0);
    Atomics.store(ctl, this.arriveBase + this.me, epoch);
    Atomics.add(ctl, this.bell, 1);
    Atomics.notify(ctl, this.bell);
    if (this.ranks.length === 1) return;
    let waited = 0; // ms of waiting without progress, suspensions excluded (module comment)
    let last = -1;
    let lastBell = 0;
    let spins = 0;
    for (;;) {
      const b = Atomics.load(ctl, this.bell);
      if (this.allArrived(epoch)) return;
      const abort = Atomics.load(ctl, ABORT);
      if (abort !== 0) throw new CommAbortedError(op, groupName, abort > 0 ? abort - 1 : -1, this.me);
      if (spins < SPINS) {
        spins++;
        continue;
      }
      const now = performance.now();
      if (last < 0 || b !== lastBell) waited = 0;
      else waited += Math.min(now - last, MAX_SLICE_CREDIT_MS);
      last = now;
      lastBell = b;
      if (waited >= timeoutMs) throw new CommTimeoutError(op, groupName, this.missing(epoch), timeoutMs / 1000, this.me);
      // FINISHED is read before `arrive`: a rank stores its last arrival before its FINISHED flag.
      const gone = this.ranks.filter(
        (r) =>
          Atomics.load(ctl, HEADER_BASE + HEADER_WORDS * r + FINISHED_WORD) === 1 &&
          ((Atomics.load(ctl, this.arriveBase + r) - epoch) | 0) < 0,
      );
      if (gone.length > 0) throw new CommPeerFinishedError(op, groupName, gone, this.me);
      Atomics.wait(ctl, this.bell, b, Math.max(1, Math.min(WAIT_SLICE_MS, timeoutMs - waited)));
    }
  }

  private allArrived(epoch: number): boolean {
    for (const r of this.ranks) if (((Atomics.load(this.ctl, this.arriveBase + r) - epoch) | 0) < 0) return false;
    return true;
  }

  private missing(epoch: number): number[] {
    return this.ranks.filter((r) => ((Atomics.load(this.ctl, this.arriveBase + r) - epoch) | 0) < 0);
  }
}

/**
 * Find or claim the registry entry for the member set `ranks` (ascending world ranks) and return
 * its index. Throws when all {@link MAX_GROUPS} entries hold other sets.
 */
export function registerGroup(ctl: Int32Array, worldSize: number, ranks: readonly number[]): number {
  const layout = controlLayout(worldSize);
  const mask = new Int32Array(layout.maskWords);
  for (const r of ranks) mask[r >> 5] |= 1 << (r & 31);
  for (let e = 0; e < MAX_GROUPS; e++) {
    const base = layout.registryBase + e * layout.entryWords;
    let state = Atomics.compareExchange(ctl, base, 0, 1);
    if (state === 0) {
      for (let w = 0; w < layout.maskWords; w++) Atomics.store(ctl, base + 2 + w, mask[w]);
      Atomics.store(ctl, base, 2);
      Atomics.notify(ctl, base);
      return e;
    }
    while (state === 1) {
      Atomics.wait(ctl, base, 1, 10);
      state = Atomics.load(ctl, base);
    }
    let same = true;
    for (let w = 0; w < layout.maskWords; w++) if (Atomics.load(ctl, base + 2 + w) !== mask[w]) same = false;
    if (same) return e;
  }
  throw new Error(`local comm: group registry full (${MAX_GROUPS} distinct rank sets); cannot create group [${ranks.join(",")}]`);
}
