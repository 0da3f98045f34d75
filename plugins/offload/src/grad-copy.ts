/**
 * ZeRO-Offload's gradient copy-out overlapped with backward (Ren et al., "ZeRO-Offload", USENIX
 * ATC'21, §4.2: each gradient partition is moved to the CPU as soon as its reduction is done): the
 * offload hook's `gradReduced(unit)` — fired when the unit's owned gradient is final for the step,
 * during the last micro-batch's backward (core/src/engine/grad-reduced.ts) — starts the device → host
 * copy of `ownedGrad()` into the unit's own host buffer and returns; backward goes on meanwhile. The
 * optimizer step then takes the landed copy instead of reading the device.
 *
 * Each offloaded unit keeps one host gradient buffer (its optimizer range: optimCount elements of
 * the gradient dtype, in a SharedArrayBuffer the AdamW threads read), counted as host tag `grad`.
 * A copy of a step that was then skipped (fp16 overflow) is simply replaced by the next step's; a
 * new copy of a unit waits for its previous one, so two never write the same buffer at once.
 */
import { DTYPE_BYTES, type Backend } from "@zeromoe/kernels";
import type { UnitHandle } from "@zeromoe/core/plugin";
import type { GradDtype } from "./host-adamw.ts";
import type { HostLedger } from "./host-ledger.ts";

/** A landed (or landing) host copy of one unit's owned gradient. */
export type HostGrad = Float32Array | Uint16Array;

/** Per-unit host gradient buffers and the copies in flight (see the module comment). */
export class GradCopies {
  private readonly bufs = new Map<UnitHandle, SharedArrayBuffer>();
  private readonly pending = new Map<UnitHandle, Promise<HostGrad>>();
  constructor(private readonly ledger: HostLedger) {}

  /** The host buffer of `u`'s owned gradient (optimCount elements of its dtype), allocated once. */
  buffer(u: UnitHandle): HostGrad {
    const dtype = u.dtype as GradDtype;
    const n = u.optimCount;
    const bytes = Math.max(16, n * DTYPE_BYTES[dtype]);
    let sab = this.bufs.get(u);
    if (!sab || sab.byteLength < bytes) {
      const next = new SharedArrayBuffer(bytes);
      this.ledger.addHost("grad", next.byteLength - (sab?.byteLength ?? 0));
      this.bufs.set(u, next);
      sab = next;
    }
    return dtype === "f32" ? new Float32Array(sab, 0, n) : new Uint16Array(sab, 0, n);
  }

  /** Start copying `u`'s owned gradient device → host now (returns at once; the copy lands later).
   * Counts the bytes in `ledger.moved.grad_d2h`. */
  start(be: Backend, u: UnitHandle): void {
    const { view, n } = u.ownedGrad();
    const prev = this.pending.get(u);
    const read = be.read(view, n);
    const copy = (prev ?? Promise.resolve(null)).then(async () => {
      const raw = await read;
      const out = this.buffer(u);
      if (raw instanceof Float64Array) (out as Float32Array).set(raw);
      else (out as Float32Array | Uint16Array).set(raw as Float32Array & Uint16Array);
      return out;
    });
    // a failure surfaces where the copy is taken (the optimizer step), not as an unhandled rejection
    copy.catch(() => undefined);
    this.pending.set(u, copy);
    this.ledger.moved.grad_d2h += n * DTYPE_BYTES[u.dtype];
  }

  /** The copy started for `u` this step (removed from the pending set), or null when none was. */
  take(u: UnitHandle): Promise<HostGrad> | null {
    const p = this.pending.get(u) ?? null;
    this.pending.delete(u);
    return p;
  }

  /** Release the host buffers. */
  free(): void {
    for (const sab of this.bufs.values()) this.ledger.addHost("grad", -sab.byteLength);
    this.bufs.clear();
    this.pending.clear();
  }
}
