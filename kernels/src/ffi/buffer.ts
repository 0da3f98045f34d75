/**
 * GPUBuffer over a WGPUBuffer (WebGPU spec §5): mapAsync, getMappedRange, unmap, destroy.
 *
 * getMappedRange returns an ArrayBuffer that aliases wgpu-native's mapped memory (no copy); unmap
 * and destroy detach every such ArrayBuffer (ArrayBuffer.prototype.transfer(0)) before the memory
 * goes away, so a stale view reads as length 0 instead of freed memory.
 */
import { toArrayBuffer, type Pointer } from "../runtime/ffi.ts";
import { GPUMapModeFlags } from "./constants.ts";
import type { GPUDeviceImpl } from "./device.ts";
import { domError } from "./errors.ts";
import { slotMessage } from "./native.ts";

/** Keeps a buffer wrapper (and so its native handle) alive while a mapped range of it is. */
const rangeOwners = new WeakMap<ArrayBuffer, GPUBufferImpl>();

/** WebGPU GPUBuffer implemented over a WGPUBuffer handle. */
export class GPUBufferImpl {
  readonly __brand = "GPUBuffer" as const;
  /** Size in bytes. */
  readonly size: number;
  /** GPUBufferUsage flags. */
  readonly usage: number;
  label: string;
  private state: GPUBufferMapState;
  private mapMode = 0;
  private mapOffset = 0;
  private mapSize = 0;
  private ranges: ArrayBuffer[] = [];
  private destroyed = false;

  constructor(
    readonly device: GPUDeviceImpl,
    readonly handle: Pointer,
    size: number,
    usage: number,
    mappedAtCreation: boolean,
    label: string,
  ) {
    this.size = size;
    this.usage = usage;
    this.label = label;
    this.state = mappedAtCreation ? "mapped" : "unmapped";
    if (mappedAtCreation) {
      this.mapMode = GPUMapModeFlags.WRITE;
      this.mapSize = size;
    }
    device.ctx.track(this, handle, "wgpuBufferRelease");
  }

  /** True after destroy(). */
  get isDestroyed(): boolean {
    return this.destroyed;
  }

  /** "unmapped" | "pending" | "mapped". */
  get mapState(): GPUBufferMapState {
    return this.state;
  }

  /**
   * Map `[offset, offset + size)` for reading (GPUMapMode.READ) or writing (WRITE). `offset` must be
   * a multiple of 8 and `size` of 4 (bytes). Rejects with OperationError when the buffer is not
   * unmapped, the range or usage is invalid, or the device is lost; AbortError when unmapped first.
   */
  mapAsync(mode: number, offset = 0, size?: number): Promise<undefined> {
    const n = this.device.ctx.native;
    const sz = size ?? Math.max(0, this.size - offset);
    if (this.destroyed) return Promise.reject(domError("OperationError", `mapAsync: buffer '${this.label}' is destroyed`));
    if (this.state !== "unmapped") return Promise.reject(domError("OperationError", `mapAsync: buffer '${this.label}' is ${this.state}, expected unmapped`));
    if (offset % 8 !== 0 || sz % 4 !== 0 || offset + sz > this.size) {
      return Promise.reject(domError("OperationError", `mapAsync: range offset ${offset}, size ${sz} of buffer '${this.label}' (${this.size} bytes) must have offset % 8 == 0, size % 4 == 0 and lie inside the buffer`));
    }
    const lost = this.device.lostError("mapAsync");
    if (lost) return Promise.reject(lost);
    this.device.queue.flushWrites();
    const slot = n.shim.zm_slot_new()!;
    this.state = "pending";
    n.shim.zm_buffer_map_async(this.handle, mode, offset, sz, slot);
    try {
      this.device.checkErrors(`mapAsync of buffer '${this.label}'`);
    } catch (e) {
      this.state = "unmapped";
      return Promise.reject(e);
    }
    return this.device.ctx.pump.wait<undefined>(slot, this.device, `mapAsync of buffer '${this.label}'`, (s) => {
      const status = n.shim.zm_slot_status(s);
      if (status !== 1) {
        if (this.state === "pending") this.state = "unmapped";
        const name = status === 4 ? "AbortError" : "OperationError";
        throw domError(name, `mapAsync of buffer '${this.label}' failed (WGPUMapAsyncStatus ${status}): ${slotMessage(n, s)}`);
      }
      this.state = "mapped";
      this.mapMode = mode;
      this.mapOffset = offset;
      this.mapSize = sz;
      return undefined;
    }).catch((e) => {
      if (this.state === "pending") this.state = "unmapped";
      throw e;
    });
  }

  /**
   * An ArrayBuffer aliasing the mapped bytes `[offset, offset + size)` (offset multiple of 8, size
   * of 4, inside the mapped range). Valid until unmap/destroy, which detach it.
   * @throws OperationError when not mapped or the range is invalid.
   */
  getMappedRange(offset = 0, size?: number): ArrayBuffer {
    const sz = size ?? Math.max(0, this.mapOffset + this.mapSize - offset);
    this.unmapIfDeviceLost();
    if (this.state !== "mapped") throw domError("OperationError", `getMappedRange: buffer '${this.label}' is ${this.state}, expected mapped${this.device.lostError("getMappedRange") ? " (the device is lost or destroyed, which unmaps every buffer)" : ""}`);
    if (offset % 8 !== 0 || sz % 4 !== 0 || offset < this.mapOffset || offset + sz > this.mapOffset + this.mapSize) {
      throw domError("OperationError", `getMappedRange: range offset ${offset}, size ${sz} is not inside the mapped range [${this.mapOffset}, ${this.mapOffset + this.mapSize}) of buffer '${this.label}' or misaligned`);
    }
    if (sz === 0) return new ArrayBuffer(0);
    const lib = this.device.ctx.native.lib;
    const p = this.mapMode === GPUMapModeFlags.READ ? lib.wgpuBufferGetConstMappedRange(this.handle, offset, sz) : lib.wgpuBufferGetMappedRange(this.handle, offset, sz);
    if (!p) throw domError("OperationError", `getMappedRange: wgpu-native returned no memory for buffer '${this.label}' [${offset}, ${offset + sz})`);
    const ab = toArrayBuffer(p, 0, sz);
    this.ranges.push(ab);
    rangeOwners.set(ab, this);
    return ab;
  }

  /** Detach mapped ranges and unmap. A pending mapAsync is aborted (rejects with AbortError). */
  unmap(): undefined {
    this.unmapIfDeviceLost();
    if (this.state === "unmapped") return undefined;
    this.detachRanges();
    this.device.ctx.native.lib.wgpuBufferUnmap(this.handle);
    this.state = "unmapped";
    this.mapMode = 0;
    this.mapOffset = 0;
    this.mapSize = 0;
    this.device.checkErrors(`unmap of buffer '${this.label}'`);
    return undefined;
  }

  /** Free the buffer's memory (wgpuBufferDestroy); unmaps first. The handle is released on
   * garbage collection. Idempotent. */
  destroy(): undefined {
    if (this.destroyed) return undefined;
    this.unmapIfDeviceLost();
    if (this.state === "mapped") {
      this.detachRanges();
      this.device.ctx.native.lib.wgpuBufferUnmap(this.handle);
    }
    this.state = "unmapped";
    this.destroyed = true;
    this.device.ctx.native.lib.wgpuBufferDestroy(this.handle);
    return undefined;
  }

  /**
   * A lost or destroyed device has unmapped and freed every buffer (WebGPU: device.destroy() unmaps
   * all buffers). wgpu-native aborts the process (a Rust panic, not an error) when a mapped range of
   * such a buffer is requested, so the wrapper's state follows the device: ranges are detached and
   * the buffer counts as unmapped. A mapping that completed just before the loss is covered too.
   */
  private unmapIfDeviceLost(): void {
    if (this.state !== "mapped" || !this.device.lostError("buffer mapping")) return;
    this.detachRanges();
    this.state = "unmapped";
    this.mapMode = 0;
    this.mapOffset = 0;
    this.mapSize = 0;
  }

  private detachRanges(): void {
    for (const ab of this.ranges) {
      const a = ab as ArrayBuffer & { detached: boolean; transfer(n: number): ArrayBuffer };
      if (!a.detached) a.transfer(0);
      rangeOwners.delete(ab);
    }
    this.ranges = [];
  }
}
