/**
 * What every WebGPU object of one `GPU` shares: the native layer, the WGPUInstance and the event
 * pump; and the process-wide finalization registry that releases wgpu-native handles of objects
 * dropped without `destroy()`.
 */
import type { Pointer } from "../runtime/ffi.ts";
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
  /** The loaded library (cached per path in native.ts for the process's lifetime). */
  native: Native;
  release: ReleaseName;
  handle: Pointer;
}

/**
 * One registry for the process, not one per context: a registry that is itself garbage never runs
 * its callbacks, and a context dies together with its objects when a program drops a whole
 * `createGPU()` → adapter → device graph at once (a backend made and dropped in a function) — the
 * devices were then never released and NVIDIA refused the 64th (kernel conformance suite on the
 * H200: "requestDevice failed: Parent device is lost").
 */
const registry = new FinalizationRegistry<Held>((h) => (h.native.lib[h.release] as (p: Pointer) => void)(h.handle));

/** Shared state of one `GPU` object (see file comment). */
export class FFIContext {

  constructor(
    readonly native: Native,
    readonly instance: Pointer,
    readonly pump: EventPump,
  ) {}

  /** Release `handle` with the wgpu-native function `release` when `owner` is garbage-collected,
   * unless {@link untrack}ed. */
  track(owner: object, handle: Pointer, release: ReleaseName): void {
    registry.register(owner, { native: this.native, release, handle }, owner);
  }

  /** Stop tracking `owner` (its handle was released explicitly). */
  untrack(owner: object): void {
    registry.unregister(owner);
  }
}
