/**
 * GPUQueue over a WGPUQueue (WebGPU spec §19): submit, writeBuffer, onSubmittedWorkDone.
 */
import { ptr, type Pointer } from "../runtime/ffi.ts";
import { GPUBufferImpl } from "./buffer.ts";
import type { GPUDeviceImpl } from "./device.ts";
import { GPUCommandBufferImpl } from "./encoder.ts";
import { ERROR_TYPE } from "./constants.ts";
import { domError, notSupported } from "./errors.ts";
import { slotMessage } from "./native.ts";

/** WebGPU GPUQueue implemented over the device's WGPUQueue. */
export class GPUQueueImpl {
  readonly __brand = "GPUQueue" as const;
  label = "";
  /** wgpu-native submission index of the last submit (0 before any). */
  lastSubmissionIndex = 0;
  /** writeBuffer calls not yet followed by a submit: wgpu stages them until the next submit. */
  private pendingWrites = false;

  constructor(
    readonly device: GPUDeviceImpl,
    readonly handle: Pointer,
  ) {
    device.ctx.track(this, handle, "wgpuQueueRelease");
  }

  /** Submit command buffers in order. Each command buffer can be submitted once; its native handle
   * is released here. Validation errors are delivered as uncaptured errors (thrown by default). */
  submit(commandBuffers: Iterable<GPUCommandBuffer>): undefined {
    this.device.ensureAlive("queue.submit");
    const list = Array.from(commandBuffers);
    // wgpu-native 29 aborts the process on any submit validation error (handle_error_fatal), so the
    // spec's submit checks are made here first: invalid command buffers, mapped/destroyed buffers.
    const problem = this.submitProblem(list);
    if (problem) {
      this.device.reportError(ERROR_TYPE.validation, problem, "queue.submit");
      return undefined;
    }
    const handles = new BigUint64Array(Math.max(1, list.length));
    list.forEach((cb, i) => {
      handles[i] = BigInt((cb as GPUCommandBufferImpl).take("queue.submit") as unknown as number);
    });
    const lib = this.device.ctx.native.lib;
    this.lastSubmissionIndex = lib.wgpuQueueSubmitForIndex(this.handle, list.length, ptr(handles)) as number;
    this.pendingWrites = false;
    for (let i = 0; i < list.length; i++) lib.wgpuCommandBufferRelease(Number(handles[i]) as unknown as Pointer);
    this.device.checkErrors("queue.submit");
    return undefined;
  }

  /** The reason `list` may not be submitted, or null. */
  private submitProblem(list: GPUCommandBuffer[]): string | null {
    const seen = new Set<GPUCommandBuffer>();
    for (const [i, cb] of list.entries()) {
      if (!(cb instanceof GPUCommandBufferImpl)) throw new TypeError(`queue.submit: commandBuffers[${i}] is not a GPUCommandBuffer of this binding`);
      if (seen.has(cb)) return `queue.submit: command buffer '${cb.label}' appears twice`;
      seen.add(cb);
      if (!cb.pending) return `queue.submit: command buffer '${cb.label}' was already submitted`;
      if (cb.invalid) return `queue.submit: command buffer '${cb.label}' is invalid (its encoding failed)`;
      for (const b of cb.used) {
        if (b.isDestroyed) return `queue.submit: buffer '${b.label}' used by command buffer '${cb.label}' is destroyed`;
        if (b.mapState !== "unmapped") return `queue.submit: buffer '${b.label}' used by command buffer '${cb.label}' is ${b.mapState}; unmap it first`;
      }
    }
    return null;
  }

  /**
   * Copy `data` into `buffer` at `bufferOffset` (bytes). For a typed array `dataOffset` and `size`
   * count elements, for an ArrayBuffer/DataView bytes (spec). The byte count must be a multiple of 4.
   * The data is copied before the call returns.
   * @throws OperationError on an out-of-range or misaligned write.
   */
  writeBuffer(buffer: GPUBuffer, bufferOffset: number, data: ArrayBufferView | ArrayBuffer | SharedArrayBuffer, dataOffset = 0, size?: number): undefined {
    if (!(buffer instanceof GPUBufferImpl)) throw new TypeError("writeBuffer: buffer is not a GPUBuffer of this binding");
    this.device.ensureAlive("queue.writeBuffer");
    let bytes: Uint8Array;
    let elem = 1;
    if (ArrayBuffer.isView(data)) {
      elem = data instanceof DataView ? 1 : (data as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
      bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    } else bytes = new Uint8Array(data as ArrayBuffer);
    const start = dataOffset * elem;
    const count = size === undefined ? bytes.byteLength - start : size * elem;
    if (start < 0 || count < 0 || start + count > bytes.byteLength) {
      throw domError("OperationError", `writeBuffer: dataOffset ${dataOffset}, size ${size} exceed the ${bytes.byteLength}-byte source`);
    }
    if (count % 4 !== 0) throw domError("OperationError", `writeBuffer: byte count ${count} must be a multiple of 4`);
    if (bufferOffset % 4 !== 0 || bufferOffset + count > buffer.size) {
      throw domError("OperationError", `writeBuffer: ${count} bytes at offset ${bufferOffset} do not fit buffer '${buffer.label}' (${buffer.size} bytes) or the offset is not a multiple of 4`);
    }
    if (count === 0) return undefined;
    const src = bytes.subarray(start, start + count);
    this.device.ctx.native.lib.wgpuQueueWriteBuffer(this.handle, buffer.handle, bufferOffset, ptr(src), count);
    this.pendingWrites = true;
    this.device.checkErrors(`queue.writeBuffer to '${buffer.label}'`);
    return undefined;
  }

  /**
   * Submit staged writeBuffer data if any. wgpu executes queue.writeBuffer only at the next submit;
   * the spec orders it before later mapAsync/onSubmittedWorkDone, so those call this first.
   */
  flushWrites(): void {
    if (!this.pendingWrites) return;
    this.lastSubmissionIndex = this.device.ctx.native.lib.wgpuQueueSubmitForIndex(this.handle, 0, null) as number;
    this.pendingWrites = false;
  }

  /** Resolves when all work submitted so far has completed; rejects on device loss. */
  onSubmittedWorkDone(): Promise<undefined> {
    const n = this.device.ctx.native;
    const lost = this.device.lostError("onSubmittedWorkDone");
    if (lost) return Promise.reject(lost);
    this.flushWrites();
    const slot = n.shim.zm_slot_new()!;
    n.shim.zm_queue_on_submitted_work_done(this.handle, slot);
    return this.device.ctx.pump.wait(slot, this.device, "onSubmittedWorkDone", (s) => {
      const status = n.shim.zm_slot_status(s);
      if (status !== 1) throw domError("OperationError", `onSubmittedWorkDone failed (status ${status}): ${slotMessage(n, s)}`);
      return undefined;
    });
  }

  /** Non-standard (wgpuQueueGetTimestampPeriod): nanoseconds per timestamp tick. */
  getTimestampPeriod(): number {
    return this.device.ctx.native.lib.wgpuQueueGetTimestampPeriod(this.handle);
  }

  writeTexture(): never {
    return notSupported("GPUQueue.writeTexture");
  }
  copyExternalImageToTexture(): never {
    return notSupported("GPUQueue.copyExternalImageToTexture");
  }
}
