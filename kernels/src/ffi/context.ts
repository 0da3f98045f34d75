/**
 * What every WebGPU object of one `GPU` shares: the native layer, the WGPUInstance, the event pump,
 * and the finalization registry that releases wgpu-native handles of objects dropped without
 * `destroy()`.
 */
import type { Pointer } from "bun:ffi";
import type { EventPump } from "./events.ts";
import type { Native } from "./native.ts";

/** The name of a wgpu-native release function (`wgpuXRelease`). */
export type ReleaseName = Extract<keyof Native["lib"], `wgpu${string}Release`>;

/**
 * What the registry keeps for a tracked object: a function *name* and the handle, never a closure.
 * A closure made in the owner's constructor (an arrow function there) captures the owner's `this`,
 * and a held value that reaches its owner keeps the owner alive for ever: nothing was ever released
 * (NVIDIA then refuses the 64th live device of a process, and every bind group leaked).
 */
interface Held {
  release: ReleaseName;
  handle: Pointer;
}

/** Shared state of one `GPU` object (see file comment). */
export class FFIContext {
  private readonly registry = new FinalizationRegistry<Held>((h) => (this.native.lib[h.release] as (p: Pointer) => void)(h.handle));

  constructor(
    readonly native: Native,
    readonly instance: Pointer,
    readonly pump: EventPump,
  ) {}

  /** Release `handle` with the wgpu-native function `release` when `owner` is garbage-collected,
   * unless {@link untrack}ed. */
  track(owner: object, handle: Pointer, release: ReleaseName): void {
    this.registry.register(owner, { release, handle }, owner);
  }

  /** Stop tracking `owner` (its handle was released explicitly). */
  untrack(owner: object): void {
    this.registry.unregister(owner);
  }
}
