/**
 * What every WebGPU object of one `GPU` shares: the native layer, the WGPUInstance, the event pump,
 * and the finalization registry that releases wgpu-native handles of objects dropped without
 * `destroy()`.
 */
import type { Pointer } from "bun:ffi";
import type { EventPump } from "./events.ts";
import type { Native } from "./native.ts";

/** A wgpu-native release function (`wgpuXRelease`). */
export type ReleaseFn = (handle: Pointer) => void;

interface Held {
  release: ReleaseFn;
  handle: Pointer;
}

/** Shared state of one `GPU` object (see file comment). */
export class FFIContext {
  private readonly registry = new FinalizationRegistry<Held>((h) => h.release(h.handle));

  constructor(
    readonly native: Native,
    readonly instance: Pointer,
    readonly pump: EventPump,
  ) {}

  /** Release `handle` with `release` when `owner` is garbage-collected, unless {@link untrack}ed. */
  track(owner: object, handle: Pointer, release: ReleaseFn): void {
    this.registry.register(owner, { release, handle }, owner);
  }

  /** Stop tracking `owner` (its handle was released explicitly). */
  untrack(owner: object): void {
    this.registry.unregister(owner);
  }
}
