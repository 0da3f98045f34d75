/**
 * GPUQuerySet over a WGPUQuerySet (WebGPU spec §20); timestamp queries are written by compute
 * passes (`timestampWrites`) and resolved with commandEncoder.resolveQuerySet into a buffer of
 * u64 ticks (multiply by queue.getTimestampPeriod() for nanoseconds).
 */
import type { Pointer } from "../runtime/ffi.ts";
import type { GPUDeviceImpl } from "./device.ts";

/** WebGPU GPUQuerySet implemented over a WGPUQuerySet handle. */
export class GPUQuerySetImpl {
  readonly __brand = "GPUQuerySet" as const;
  label: string;
  private destroyed = false;

  constructor(
    readonly device: GPUDeviceImpl,
    readonly handle: Pointer,
    readonly type: GPUQueryType,
    readonly count: number,
    label: string,
  ) {
    this.label = label;
    device.ctx.track(this, handle, "wgpuQuerySetRelease");
  }

  /** Free the query set. Idempotent. Implemented as an immediate release of our handle (wgpu keeps
   * the object alive while queued work still uses it): wgpu-native 29.0.1.1 panics ("Cannot remove a
   * vacant resource") when a query set that went through wgpuQuerySetDestroy is released later,
   * which aborted the process once the garbage collector ran. */
  destroy(): undefined {
    if (this.destroyed) return undefined;
    this.destroyed = true;
    this.device.ctx.untrack(this);
    this.device.ctx.native.lib.wgpuQuerySetRelease(this.handle);
    return undefined;
  }
}
