/**
 * Driving wgpu-native's callbacks. wgpu-native runs callbacks only when polled
 * (wgpuInstanceProcessEvents, wgpuDevicePoll; docs/domain.md §6). Every asynchronous call made through
 * the shim fills a C "slot"; {@link EventPump.wait} returns a promise that is settled once the slot
 * is done, polling from the JavaScript event loop: first with `setImmediate` (microseconds apart)
 * for `spinMs`, then with `setTimeout(0)` (about 1 ms apart) so the CPU is left to the driver.
 * In `block` mode, after the spin phase the pump waits inside wgpuDevicePoll(wait = true) instead.
 */
import type { Pointer } from "../runtime/ffi.ts";
import type { Native } from "./native.ts";

/** How an {@link EventPump} waits once the short spin phase is over. */
export type PollMode = "yield" | "block";

/** What the pump needs from a device: its handle, and whether it has been lost. */
export interface PumpDevice {
  readonly handle: Pointer;
  /** Returns an error to reject pending work with when the device is lost, else null. */
  lostError(operation: string): Error | null;
}

interface Waiter {
  slot: Pointer;
  device: PumpDevice | null;
  operation: string;
  settle: (slot: Pointer) => unknown;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/** Polls wgpu-native for one instance and settles the promises of pending slots. */
export class EventPump {
  private readonly waiters = new Set<Waiter>();
  private scheduled = false;
  private spinStart = 0;

  /**
   * @param native the loaded native layer
   * @param instance the WGPUInstance handle
   * @param mode "yield" (default: never block the event loop) or "block" (wait in wgpuDevicePoll)
   * @param spinMs how long to poll with setImmediate before backing off (milliseconds)
   */
  constructor(
    private readonly native: Native,
    private readonly instance: Pointer,
    readonly mode: PollMode = "yield",
    readonly spinMs = 0.5,
  ) {}

  /**
   * Wait for `slot` (a zm_slot*) to be filled by its callback, then call `settle(slot)` and resolve
   * with its result (a throw from `settle` rejects). The slot is freed afterwards in every case.
   * Rejects with the device's lost error when `device` is lost first.
   */
  wait<T>(slot: Pointer, device: PumpDevice | null, operation: string, settle: (slot: Pointer) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const w: Waiter = { slot, device, operation, settle, resolve: resolve as (v: unknown) => void, reject };
      this.waiters.add(w);
      // Callbacks may already have fired synchronously (wgpu-native does that for some calls).
      if (!this.settleReady()) this.schedule();
    });
  }

  /** Poll once now (processEvents + a non-blocking poll of every device with pending work) and
   * settle what is done. Returns true when nothing is pending any more. */
  pollOnce(): boolean {
    this.native.lib.wgpuInstanceProcessEvents(this.instance);
    const seen = new Set<Pointer>();
    for (const w of this.waiters) {
      if (w.device && !seen.has(w.device.handle)) {
        seen.add(w.device.handle);
        if (!w.device.lostError("poll")) this.native.shim.zm_device_poll(w.device.handle, 0, 0);
      }
    }
    return this.settleReady();
  }

  /** Settle every done waiter; true when none is left pending. */
  private settleReady(): boolean {
    const shim = this.native.shim;
    for (const w of this.waiters) {
      let lost: Error | null = null;
      if (shim.zm_slot_done(w.slot) === 0) {
        lost = w.device ? w.device.lostError(w.operation) : null;
        if (!lost) continue;
      }
      this.waiters.delete(w);
      try {
        if (lost) w.reject(lost);
        else w.resolve(w.settle(w.slot));
      } catch (e) {
        w.reject(e);
      } finally {
        // A slot still pending at loss may yet be written by its callback: leak it rather than free.
        if (!lost) shim.zm_slot_free(w.slot);
      }
    }
    return this.waiters.size === 0;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    this.spinStart = performance.now();
    setImmediate(() => this.tick());
  }

  private tick(): void {
    this.scheduled = false;
    if (this.pollOnce()) return;
    const spinning = performance.now() - this.spinStart < this.spinMs;
    if (!spinning && this.mode === "block") {
      for (const w of this.waiters) {
        if (w.device && !w.device.lostError("poll")) {
          this.native.shim.zm_device_poll(w.device.handle, 1, 0);
          break;
        }
      }
      if (this.pollOnce()) return;
    }
    this.scheduled = true;
    if (spinning) setImmediate(() => this.tick());
    else setTimeout(() => this.tick(), 0);
  }

  /** Number of pending operations (for tests and diagnostics). */
  get pending(): number {
    return this.waiters.size;
  }
}
