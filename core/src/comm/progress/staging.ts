/**
 * Staging of a collective's arrays for a progress thread (threaded-communicator.ts): the thread
 * can only touch memory it shares with the rank, so each array on an ordinary ArrayBuffer is given
 * a place in one SharedArrayBuffer per call, copied in when the collective starts (its inputs) and
 * copied out when it completes (its outputs). Arrays that already live on a SharedArrayBuffer are
 * passed as they are (no copy). Arrays viewing the same caller buffer keep their relative layout in
 * the staging buffer, so an in-place or overlapping call (all_reduce in place, reduce_scatter into
 * its own input) behaves as it does on the caller's memory. Staging buffers are pooled.
 */

import type { CommArray } from "../communicator.ts";
import type { ArrayCtor } from "../collective-args.ts";

/** One array of a call: `copyIn` its bytes before the movement; `copyOutElems` elements from its
 * start are copied back after it (0: not an output). */
export interface StageEntry {
  array: CommArray | null;
  copyIn: boolean;
  copyOutElems: number;
}

/** The staged call: the views the thread works on (same order as the entries; null stays null). */
export interface Staged {
  views: (CommArray | null)[];
  /** Copy the outputs back into the caller's arrays and return the staging buffer to the pool. */
  finish(): void;
  /** Return the staging buffer without copying (the collective failed). */
  release(): void;
}

/** Smallest staging buffer allocated, bytes. */
const MIN_STAGING = 64 << 10;
/** Buffers kept in the pool; beyond, returned ones are dropped (largest kept). */
const POOL_SIZE = 8;

/** A pool of SharedArrayBuffers for staging (one per communicator; not shared between threads). */
export class StagingPool {
  private free: SharedArrayBuffer[] = [];

  /** Stage `entries` (see the file comment). */
  stage(entries: readonly StageEntry[]): Staged {
    // regions: one per caller buffer that is not shared, covering its arrays' byte range
    const regions = new Map<ArrayBufferLike, { lo: number; hi: number; at: number }>();
    for (const e of entries) {
      const a = e.array;
      if (!a || a.buffer instanceof SharedArrayBuffer) continue;
      const lo = a.byteOffset - (a.byteOffset % 8);
      const hi = a.byteOffset + a.byteLength;
      const r = regions.get(a.buffer);
      if (r) {
        r.lo = Math.min(r.lo, lo);
        r.hi = Math.max(r.hi, hi);
      } else regions.set(a.buffer, { lo, hi, at: 0 });
    }
    let need = 0;
    for (const r of regions.values()) {
      r.at = need;
      need += Math.ceil((r.hi - r.lo) / 8) * 8;
    }
    const sab = need > 0 ? this.take(need) : null;
    const views = entries.map((e) => {
      const a = e.array;
      if (!a) return null;
      const r = regions.get(a.buffer);
      if (!r) return a;
      const off = r.at + (a.byteOffset - r.lo);
      const v = new (a.constructor as ArrayCtor)(sab!, off, a.length);
      if (e.copyIn && a.byteLength > 0) new Uint8Array(sab!, off, a.byteLength).set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
      return v;
    });
    let done = false;
    const release = () => {
      if (done) return;
      done = true;
      if (sab) this.give(sab);
    };
    return {
      views,
      finish: () => {
        entries.forEach((e, i) => {
          const a = e.array;
          const v = views[i];
          if (!a || !v || v === a || e.copyOutElems === 0) return;
          a.set(v.subarray(0, e.copyOutElems) as never);
        });
        release();
      },
      release,
    };
  }

  private take(bytes: number): SharedArrayBuffer {
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const b = this.free[i]!;
      if (b.byteLength >= bytes && (best < 0 || b.byteLength < this.free[best]!.byteLength)) best = i;
    }
    if (best >= 0) return this.free.splice(best, 1)[0]!;
    let size = MIN_STAGING;
    while (size < bytes) size *= 2;
    return new SharedArrayBuffer(size);
  }

  private give(b: SharedArrayBuffer): void {
    this.free.push(b);
    if (this.free.length > POOL_SIZE) {
      this.free.sort((x, y) => y.byteLength - x.byteLength);
      this.free.length = POOL_SIZE;
    }
  }
}
