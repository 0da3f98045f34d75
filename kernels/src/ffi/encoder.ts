/**
 * GPUCommandEncoder, GPUComputePassEncoder and GPUCommandBuffer (WebGPU spec §13, §14.1, §12).
 *
 * Native handles are released as soon as the spec makes an object unusable: a pass at `end()`, an
 * encoder at `finish()`, a command buffer at `queue.submit()`. Using one afterwards throws (instead
 * of touching a released handle). Debug groups and markers are passed to wgpu-native. Recording errors (say a dispatch without a pipeline) are reported
 * by wgpu-native at `end()`/`finish()` and delivered as uncaptured errors there.
 */
import { ptr, type Pointer } from "../runtime/ffi.ts";
import { GPUBindGroupImpl } from "./binding.ts";
import { GPUBufferImpl } from "./buffer.ts";
import { WGPU_QUERY_SET_INDEX_UNDEFINED, WGPU_WHOLE_SIZE } from "./constants.ts";
import type { GPUDeviceImpl } from "./device.ts";
import { notSupported } from "./errors.ts";
import { utf8 } from "./native.ts";
import { GPUComputePipelineImpl } from "./pipeline.ts";
import { GPUQuerySetImpl } from "./query.ts";

function buf(b: GPUBuffer, what: string): GPUBufferImpl {
  if (!(b instanceof GPUBufferImpl)) throw new TypeError(`${what} is not a GPUBuffer of this binding`);
  return b;
}

/** WebGPU GPUCommandBuffer: a finished encoder, submittable once. */
export class GPUCommandBufferImpl {
  readonly __brand = "GPUCommandBuffer" as const;
  label: string;
  private handle: Pointer | null;

  /**
   * @param used every buffer the commands reference (submit refuses mapped or destroyed ones:
   *   wgpu-native 29 aborts the process on any submit error, so the binding checks first)
   * @param invalid true when encoding failed (finish reported an error); submit refuses it
   */
  constructor(
    readonly device: GPUDeviceImpl,
    handle: Pointer,
    label: string,
    readonly used: ReadonlySet<GPUBufferImpl>,
    readonly invalid: boolean,
  ) {
    this.handle = handle;
    this.label = label;
    device.ctx.track(this, handle, "wgpuCommandBufferRelease");
  }

  /** True until submitted. */
  get pending(): boolean {
    return this.handle !== null;
  }

  /** Hand the native handle to `operation` (submit), which releases it. Throws when already
   * submitted. */
  take(operation: string): Pointer {
    const h = this.handle;
    if (!h) throw new Error(`${operation}: command buffer '${this.label}' was already submitted`);
    this.handle = null;
    this.device.ctx.untrack(this);
    return h;
  }
}

/** WebGPU GPUComputePassEncoder over a WGPUComputePassEncoder handle. */
export class GPUComputePassEncoderImpl {
  readonly __brand = "GPUComputePassEncoder" as const;
  label: string;
  private h: Pointer | null;

  /** @param used the encoder's set of referenced buffers, added to by setBindGroup/indirect. */
  constructor(
    readonly device: GPUDeviceImpl,
    handle: Pointer,
    label: string,
    private readonly used: Set<GPUBufferImpl>,
  ) {
    this.h = handle;
    this.label = label;
    device.ctx.track(this, handle, "wgpuComputePassEncoderRelease");
  }

  private get handle(): Pointer {
    if (!this.h) throw new Error(`compute pass '${this.label}' has ended; record into a new pass`);
    return this.h;
  }

  /** Spec setPipeline. */
  setPipeline(pipeline: GPUComputePipeline): undefined {
    if (!(pipeline instanceof GPUComputePipelineImpl)) throw new TypeError("setPipeline: not a GPUComputePipeline of this binding");
    this.device.ctx.native.lib.wgpuComputePassEncoderSetPipeline(this.handle, pipeline.handle);
    return undefined;
  }

  /** Spec setBindGroup, with optional dynamic offsets (array, or Uint32Array + start + length). */
  setBindGroup(index: number, bindGroup: GPUBindGroup | null, dynamicOffsets?: Iterable<number> | Uint32Array, start = 0, length?: number): undefined {
    if (bindGroup !== null && !(bindGroup instanceof GPUBindGroupImpl)) throw new TypeError("setBindGroup: not a GPUBindGroup of this binding");
    const lib = this.device.ctx.native.lib;
    const group = bindGroup ? bindGroup.handle : null;
    if (bindGroup) for (const b of bindGroup.buffers) this.used.add(b);
    if (!dynamicOffsets) {
      lib.wgpuComputePassEncoderSetBindGroup(this.handle, index, group, 0, null);
      return undefined;
    }
    // the whole Uint32Array as given (the per-dispatch case of a batcher) needs no subarray view
    const whole = dynamicOffsets instanceof Uint32Array && start === 0 && (length === undefined || length === dynamicOffsets.length);
    let offs = whole ? (dynamicOffsets as Uint32Array) : dynamicOffsets instanceof Uint32Array ? dynamicOffsets.subarray(start, length === undefined ? undefined : start + length) : Uint32Array.from(dynamicOffsets);
    if (offs.length === 0) offs = new Uint32Array(1);
    const count = dynamicOffsets instanceof Uint32Array ? (length ?? dynamicOffsets.length - start) : offs.length;
    lib.wgpuComputePassEncoderSetBindGroup(this.handle, index, group, count, count ? ptr(offs) : null);
    return undefined;
  }

  /** Spec dispatchWorkgroups (counts per dimension, each ≤ maxComputeWorkgroupsPerDimension). */
  dispatchWorkgroups(x: number, y = 1, z = 1): undefined {
    this.device.ctx.native.lib.wgpuComputePassEncoderDispatchWorkgroups(this.handle, x, y, z);
    return undefined;
  }

  /** Spec dispatchWorkgroupsIndirect: three u32 counts read from `indirectBuffer` at byte
   * `indirectOffset` (multiple of 4; the buffer needs INDIRECT usage). */
  dispatchWorkgroupsIndirect(indirectBuffer: GPUBuffer, indirectOffset: number): undefined {
    const b = buf(indirectBuffer, "dispatchWorkgroupsIndirect: indirectBuffer");
    this.used.add(b);
    this.device.ctx.native.lib.wgpuComputePassEncoderDispatchWorkgroupsIndirect(this.handle, b.handle, indirectOffset);
    return undefined;
  }

  /**
   * Non-standard (wgpu-native `wgpuComputePassEncoderSetImmediates`, feature `wgpu-immediates`):
   * set `data` (byte length a multiple of 4) at byte `offset` of the pipeline's `var<immediate>`
   * block, declared through the pipeline layout's `immediateSize`. Cheaper than a uniform buffer for
   * small per-dispatch parameters.
   */
  setImmediates(offset: number, data: ArrayBufferView): undefined {
    if (data.byteLength % 4 !== 0 || offset % 4 !== 0) throw new RangeError(`setImmediates: offset ${offset} and byte length ${data.byteLength} must be multiples of 4`);
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (bytes.byteLength === 0) return undefined;
    this.device.ctx.native.lib.wgpuComputePassEncoderSetImmediates(this.handle, offset, ptr(bytes), bytes.byteLength);
    return undefined;
  }

  /** Spec end: closes the pass (its handle is released) and reports recording errors. */
  end(): undefined {
    const h = this.handle;
    const lib = this.device.ctx.native.lib;
    lib.wgpuComputePassEncoderEnd(h);
    this.h = null;
    this.device.ctx.untrack(this);
    lib.wgpuComputePassEncoderRelease(h);
    this.device.checkErrors(`end of compute pass '${this.label}'`);
    return undefined;
  }

  /** Spec pushDebugGroup (shown by GPU debuggers; unbalanced groups are a validation error). */
  pushDebugGroup(groupLabel: string): undefined {
    const l = utf8(groupLabel);
    this.device.ctx.native.shim.zm_debug_label(this.handle, 1, 0, l.bytes, l.len);
    return undefined;
  }
  /** Spec popDebugGroup. */
  popDebugGroup(): undefined {
    this.device.ctx.native.lib.wgpuComputePassEncoderPopDebugGroup(this.handle);
    return undefined;
  }
  /** Spec insertDebugMarker. */
  insertDebugMarker(markerLabel: string): undefined {
    const l = utf8(markerLabel);
    this.device.ctx.native.shim.zm_debug_label(this.handle, 1, 1, l.bytes, l.len);
    return undefined;
  }
}

/** WebGPU GPUCommandEncoder over a WGPUCommandEncoder handle (compute and copy commands). */
export class GPUCommandEncoderImpl {
  readonly __brand = "GPUCommandEncoder" as const;
  label: string;
  private h: Pointer | null;
  private readonly used = new Set<GPUBufferImpl>();

  constructor(
    readonly device: GPUDeviceImpl,
    handle: Pointer,
    label: string,
  ) {
    this.h = handle;
    this.label = label;
    device.ctx.track(this, handle, "wgpuCommandEncoderRelease");
  }

  private get handle(): Pointer {
    if (!this.h) throw new Error(`command encoder '${this.label}' is finished; create a new encoder`);
    return this.h;
  }

  /** Spec beginComputePass, with optional `timestampWrites` (needs `timestamp-query`). */
  beginComputePass(descriptor: GPUComputePassDescriptor = {}): GPUComputePassEncoderImpl {
    const label = utf8(descriptor.label);
    const tw = descriptor.timestampWrites;
    let qs: Pointer | null = null;
    let begin = WGPU_QUERY_SET_INDEX_UNDEFINED;
    let end = WGPU_QUERY_SET_INDEX_UNDEFINED;
    if (tw) {
      if (!(tw.querySet instanceof GPUQuerySetImpl)) throw new TypeError("beginComputePass: timestampWrites.querySet is not a GPUQuerySet of this binding");
      qs = tw.querySet.handle;
      if (tw.beginningOfPassWriteIndex !== undefined) begin = tw.beginningOfPassWriteIndex;
      if (tw.endOfPassWriteIndex !== undefined) end = tw.endOfPassWriteIndex;
    }
    const p = this.device.ctx.native.shim.zm_begin_compute_pass(this.handle, label.bytes, label.len, qs, begin, end);
    this.device.checkErrors(`beginComputePass('${descriptor.label ?? ""}')`);
    return new GPUComputePassEncoderImpl(this.device, p!, descriptor.label ?? "", this.used);
  }

  /**
   * Spec copyBufferToBuffer, both overloads: (src, srcOffset, dst, dstOffset, size) and
   * (src, dst, size?). Offsets and size in bytes, multiples of 4.
   */
  copyBufferToBuffer(source: GPUBuffer, a: number | GPUBuffer, b?: GPUBuffer | number, c?: number, d?: number): undefined {
    const src = buf(source, "copyBufferToBuffer: source");
    let srcOffset = 0;
    let dst: GPUBufferImpl;
    let dstOffset = 0;
    let size: number;
    if (typeof a === "number") {
      srcOffset = a;
      dst = buf(b as GPUBuffer, "copyBufferToBuffer: destination");
      dstOffset = c ?? 0;
      size = d ?? src.size - srcOffset;
    } else {
      dst = buf(a, "copyBufferToBuffer: destination");
      size = (b as number | undefined) ?? src.size;
    }
    this.used.add(src).add(dst);
    this.device.ctx.native.lib.wgpuCommandEncoderCopyBufferToBuffer(this.handle, src.handle, srcOffset, dst.handle, dstOffset, size);
    return undefined;
  }

  /** Spec clearBuffer: zero `size` bytes (default: to the end) from byte `offset`. */
  clearBuffer(buffer: GPUBuffer, offset = 0, size?: number): undefined {
    const b = buf(buffer, "clearBuffer: buffer");
    this.used.add(b);
    this.device.ctx.native.lib.wgpuCommandEncoderClearBuffer(this.handle, b.handle, offset, size === undefined ? WGPU_WHOLE_SIZE : size);
    return undefined;
  }

  /** Spec resolveQuerySet: write `queryCount` u64 results from `firstQuery` into `destination` at
   * byte `destinationOffset` (multiple of 256; QUERY_RESOLVE usage). */
  resolveQuerySet(querySet: GPUQuerySet, firstQuery: number, queryCount: number, destination: GPUBuffer, destinationOffset: number): undefined {
    if (!(querySet instanceof GPUQuerySetImpl)) throw new TypeError("resolveQuerySet: querySet is not a GPUQuerySet of this binding");
    const d = buf(destination, "resolveQuerySet: destination");
    this.used.add(d);
    this.device.ctx.native.lib.wgpuCommandEncoderResolveQuerySet(this.handle, querySet.handle, firstQuery, queryCount, d.handle, destinationOffset);
    return undefined;
  }

  /**
   * Spec finish: returns the command buffer; the encoder's handle is released. Recording errors
   * (wgpu-native reports them all here) are captured by an internal error scope and delivered as
   * uncaptured errors (thrown, or an event when listened for, then the command buffer is marked
   * invalid and submit refuses it) — also inside a user's error scope.
   */
  finish(descriptor: GPUCommandBufferDescriptor = {}): GPUCommandBufferImpl {
    const h = this.handle;
    const n = this.device.ctx.native;
    const label = utf8(descriptor.label);
    const { value: cb, error } = this.device.scoped(() => n.shim.zm_encoder_finish(h, label.bytes, label.len));
    this.h = null;
    this.device.ctx.untrack(this);
    n.lib.wgpuCommandEncoderRelease(h);
    const out = new GPUCommandBufferImpl(this.device, cb!, descriptor.label ?? this.label, this.used, error !== null);
    if (error) this.device.reportError(error.type, error.message, `finish of command encoder '${this.label}'`);
    this.device.checkErrors(`finish of command encoder '${this.label}'`);
    return out;
  }

  beginRenderPass(): never {
    return notSupported("GPUCommandEncoder.beginRenderPass");
  }
  copyBufferToTexture(): never {
    return notSupported("GPUCommandEncoder.copyBufferToTexture");
  }
  copyTextureToBuffer(): never {
    return notSupported("GPUCommandEncoder.copyTextureToBuffer");
  }
  copyTextureToTexture(): never {
    return notSupported("GPUCommandEncoder.copyTextureToTexture");
  }
  /** Spec pushDebugGroup. */
  pushDebugGroup(groupLabel: string): undefined {
    const l = utf8(groupLabel);
    this.device.ctx.native.shim.zm_debug_label(this.handle, 0, 0, l.bytes, l.len);
    return undefined;
  }
  /** Spec popDebugGroup. */
  popDebugGroup(): undefined {
    this.device.ctx.native.lib.wgpuCommandEncoderPopDebugGroup(this.handle);
    return undefined;
  }
  /** Spec insertDebugMarker. */
  insertDebugMarker(markerLabel: string): undefined {
    const l = utf8(markerLabel);
    this.device.ctx.native.shim.zm_debug_label(this.handle, 0, 1, l.bytes, l.len);
    return undefined;
  }
}
