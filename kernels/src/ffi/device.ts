/**
 * GPUDevice over a WGPUDevice (WebGPU spec §4.5), compute subset.
 *
 * Error reporting: wgpu-native reports a validation/out-of-memory/internal error outside any error
 * scope through the device's uncaptured-error callback; the shim queues them, and after every call
 * that can raise one the device drains the queue: with an `uncapturederror` listener (or
 * `onuncapturederror`) it dispatches GPUUncapturedErrorEvent as the spec says; without one it throws
 * {@link GPUUncapturedError} so errors are never silent. Errors inside pushErrorScope/popErrorScope
 * go to the scope as in the spec. Device loss resolves `device.lost`, rejects pending promises and
 * makes further device calls throw {@link GPUDeviceLostError}.
 */
import { ptr, type Pointer } from "../runtime/ffi.ts";
import { readFeatures, readLimits, type AdapterInfoEx, type GPUAdapterImpl } from "./adapter.ts";
import { GPUBindGroupImpl, GPUBindGroupLayoutImpl, GPUPipelineLayoutImpl } from "./binding.ts";
import { GPUBufferImpl } from "./buffer.ts";
import { BUFFER_BINDING_TYPE, deviceLostReason, ERROR_FILTER, ERROR_TYPE, QUERY_TYPE, WGPU_WHOLE_SIZE } from "./constants.ts";
import type { FFIContext } from "./context.ts";
import { GPUCommandEncoderImpl } from "./encoder.ts";
import {
  domError,
  GPUDeviceLostError,
  GPUOutOfMemoryErrorImpl,
  GPUPipelineErrorImpl,
  GPUShaderCompilationError,
  GPUUncapturedError,
  GPUUncapturedErrorEventImpl,
  makeGPUError,
  notSupported,
  parseWGSLDiagnostics,
} from "./errors.ts";
import { slotMessage, utf8 } from "./native.ts";
import { GPUComputePipelineImpl } from "./pipeline.ts";
import { GPUQuerySetImpl } from "./query.ts";
import { GPUQueueImpl } from "./queue.ts";
import { createShaderModuleTrusted, GPUShaderModuleImpl, type ShaderRuntimeChecks } from "./shader.ts";

type Listener = Parameters<EventTarget["addEventListener"]>[1];

/** A captured error from a synchronous error scope: WGPUErrorType and message. */
export interface ScopeResult {
  type: number;
  message: string;
}

/** WebGPU GPUDevice implemented over a WGPUDevice handle. */
export class GPUDeviceImpl extends EventTarget {
  readonly __brand = "GPUDevice" as const;
  readonly features: GPUSupportedFeatures;
  readonly limits: GPUSupportedLimits;
  readonly adapterInfo: AdapterInfoEx;
  readonly queue: GPUQueueImpl;
  readonly lost: Promise<GPUDeviceLostInfo>;
  label: string;
  /** Spec event handler for uncaptured errors; when set, errors are dispatched, not thrown. */
  onuncapturederror: ((ev: GPUUncapturedErrorEvent) => unknown) | null = null;

  private resolveLost!: (info: GPUDeviceLostInfo) => void;
  private lostInfo: GPUDeviceLostInfo | null = null;
  private uncapturedListeners = 0;
  private lastScoped: ScopeResult | null = null;
  /** Error scopes pushed by the user and not yet popped. */
  private scopeDepth = 0;

  /**
   * @param handle the WGPUDevice (owned; released on garbage collection)
   * @param lostSlot zm_slot* the device-lost callback fills
   * @param errq zm_errq* the uncaptured-error callback appends to
   */
  constructor(
    readonly ctx: FFIContext,
    readonly handle: Pointer,
    readonly adapter: GPUAdapterImpl,
    private readonly lostSlot: Pointer,
    private readonly errq: Pointer,
    label: string,
  ) {
    super();
    const n = ctx.native;
    this.label = label;
    this.features = readFeatures(n, null, handle);
    this.limits = readLimits(n, null, handle);
    this.adapterInfo = adapter.info;
    this.lost = new Promise((r) => (this.resolveLost = r));
    this.queue = new GPUQueueImpl(this, n.lib.wgpuDeviceGetQueue(handle)!);
    // The lost slot and error queue are deliberately never freed: wgpu-native may still call the
    // callbacks while dropping the device, after this wrapper is gone (two small allocations).
    ctx.track(this, handle, "wgpuDeviceRelease");
  }

  // ---- errors and loss -----------------------------------------------------------------------

  /** Returns the error to reject/throw with when the device is lost (checking the native slot),
   * else null. */
  lostError(operation: string): GPUDeviceLostError | null {
    if (!this.lostInfo && this.ctx.native.shim.zm_slot_done(this.lostSlot)) {
      const s = this.ctx.native.shim;
      const info = {
        __brand: "GPUDeviceLostInfo",
        reason: deviceLostReason(s.zm_slot_reason(this.lostSlot)),
        message: slotMessage(this.ctx.native, this.lostSlot),
      } as GPUDeviceLostInfo;
      this.lostInfo = info;
      this.resolveLost(info);
    }
    return this.lostInfo ? new GPUDeviceLostError(operation, this.lostInfo.reason, this.lostInfo.message) : null;
  }

  /** Throw GPUDeviceLostError when the device is lost. */
  ensureAlive(operation: string): void {
    const e = this.lostError(operation);
    if (e) throw e;
  }

  /**
   * Deliver queued uncaptured errors raised by `operation`: dispatch `uncapturederror` events when
   * someone listens, else throw {@link GPUUncapturedError} (all messages joined).
   */
  checkErrors(operation: string): void {
    const s = this.ctx.native.shim;
    if (s.zm_errq_count(this.errq) === 0) {
      this.lostError(operation);
      return;
    }
    const errors: GPUError[] = [];
    for (let e = s.zm_errq_pop(this.errq); e; e = s.zm_errq_pop(this.errq)) {
      errors.push(makeGPUError(s.zm_slot_type(e), slotMessage(this.ctx.native, e)));
      s.zm_slot_free(e);
    }
    this.lostError(operation);
    this.deliver(errors, operation);
  }

  /**
   * Report errors found outside wgpu-native's error machinery (by the binding's own checks, or
   * captured by its internal scopes) the way uncaptured errors are: events when listened for, else
   * a thrown {@link GPUUncapturedError}.
   * @param type WGPUErrorType (2 validation, 3 out-of-memory, 4 internal)
   */
  reportError(type: number, message: string, operation: string): void {
    this.deliver([makeGPUError(type, message)], operation);
  }

  private deliver(errors: GPUError[], operation: string): void {
    if (this.uncapturedListeners > 0 || this.onuncapturederror) {
      for (const error of errors) this.dispatchEvent(new GPUUncapturedErrorEventImpl("uncapturederror", { error }));
      return;
    }
    const first = errors.length > 1 ? makeGPUError(ERROR_TYPE.validation, errors.map((e) => e.message).join("\n---\n")) : errors[0];
    throw new GPUUncapturedError(first, operation);
  }

  override dispatchEvent(event: Event): boolean {
    if (event.type === "uncapturederror" && this.onuncapturederror) this.onuncapturederror(event as GPUUncapturedErrorEvent);
    return super.dispatchEvent(event);
  }

  override addEventListener(type: string, listener: Listener | null, options?: boolean | AddEventListenerOptions): void {
    if (type === "uncapturederror" && listener) this.uncapturedListeners++;
    if (listener) super.addEventListener(type, listener, options);
  }

  override removeEventListener(type: string, listener: Listener | null, options?: boolean | EventListenerOptions): void {
    if (type === "uncapturederror" && listener) this.uncapturedListeners = Math.max(0, this.uncapturedListeners - 1);
    if (listener) super.removeEventListener(type, listener, options);
  }

  /** Spec pushErrorScope: "validation" | "out-of-memory" | "internal". */
  pushErrorScope(filter: GPUErrorFilter): undefined {
    const f = ERROR_FILTER[filter];
    if (f === undefined) throw new TypeError(`pushErrorScope: unknown filter '${filter}' (expected validation, out-of-memory or internal)`);
    // wgpu-native 29 panics (aborting the process) on the "internal" filter: refuse it here.
    if (filter === "internal") throw domError("OperationError", "pushErrorScope('internal') is not supported by wgpu-native 29 (only 'validation' and 'out-of-memory')");
    this.ensureAlive("pushErrorScope");
    this.ctx.native.lib.wgpuDevicePushErrorScope(this.handle, f);
    this.scopeDepth++;
    return undefined;
  }

  /** Spec popErrorScope: resolves with the first error caught by the innermost scope, or null.
   * Rejects with an OperationError when the scope stack is empty. */
  popErrorScope(): Promise<GPUError | null> {
    const n = this.ctx.native;
    const lost = this.lostError("popErrorScope");
    if (lost) return Promise.reject(lost);
    // wgpu-native 29 panics (aborting the process) when popping an empty stack: check here.
    if (this.scopeDepth === 0) return Promise.reject(domError("OperationError", "popErrorScope: the error scope stack is empty"));
    this.scopeDepth--;
    const slot = n.shim.zm_slot_new()!;
    n.shim.zm_pop_error_scope(this.handle, slot);
    return this.ctx.pump.wait(slot, this, "popErrorScope", (s) => {
      const status = n.shim.zm_slot_status(s);
      if (status !== 1) throw domError("OperationError", `popErrorScope failed (status ${status}): ${slotMessage(n, s)}`);
      const type = n.shim.zm_slot_type(s);
      return type === 1 ? null : makeGPUError(type, slotMessage(n, s));
    });
  }

  /** Run `fn` inside validation and out-of-memory error scopes and return the captured error
   * synchronously (wgpu-native answers popErrorScope at once; events are processed to be sure). */
  scoped<T>(fn: () => T): { value: T; error: ScopeResult | null } {
    const n = this.ctx.native;
    n.lib.wgpuDevicePushErrorScope(this.handle, ERROR_FILTER["out-of-memory"]);
    n.lib.wgpuDevicePushErrorScope(this.handle, ERROR_FILTER.validation);
    let value: T;
    try {
      value = fn();
    } finally {
      const validation = this.popSync();
      const oom = this.popSync();
      this.lastScoped = validation ?? oom;
    }
    return { value, error: this.lastScoped };
  }

  private popSync(): ScopeResult | null {
    const n = this.ctx.native;
    const slot = n.shim.zm_slot_new()!;
    try {
      n.shim.zm_pop_error_scope(this.handle, slot);
      if (!n.shim.zm_slot_done(slot)) n.lib.wgpuInstanceProcessEvents(this.ctx.instance);
      if (!n.shim.zm_slot_done(slot)) throw new Error("popErrorScope did not complete synchronously in wgpu-native");
      const type = n.shim.zm_slot_type(slot);
      return n.shim.zm_slot_status(slot) === 1 && type !== 1 ? { type, message: slotMessage(n, slot) } : null;
    } finally {
      n.shim.zm_slot_free(slot);
    }
  }

  // ---- creation ------------------------------------------------------------------------------

  /** Spec createBuffer. `size` in bytes; with `mappedAtCreation` it must be a multiple of 4
   * (RangeError). Throws GPUOutOfMemoryError when wgpu-native returns no buffer. */
  createBuffer(descriptor: GPUBufferDescriptor): GPUBufferImpl {
    this.ensureAlive("createBuffer");
    const size = Number(descriptor.size);
    if (!Number.isInteger(size) || size < 0) throw new TypeError(`createBuffer: size must be a non-negative integer number of bytes, got ${descriptor.size}`);
    if (descriptor.mappedAtCreation && size % 4 !== 0) throw new RangeError(`createBuffer: mappedAtCreation needs size % 4 == 0, got ${size}`);
    const label = utf8(descriptor.label);
    const h = this.ctx.native.shim.zm_create_buffer(this.handle, label.bytes, label.len, descriptor.usage, size, descriptor.mappedAtCreation ? 1 : 0);
    this.checkErrors(`createBuffer(size ${size}, label '${descriptor.label ?? ""}')`);
    if (!h) throw new GPUOutOfMemoryErrorImpl(`createBuffer: wgpu-native could not create a buffer of ${size} bytes (label '${descriptor.label ?? ""}')`);
    return new GPUBufferImpl(this, h, size, descriptor.usage, !!descriptor.mappedAtCreation, descriptor.label ?? "");
  }

  /**
   * Spec createShaderModule (WGSL `code`). Unlike a browser, a WGSL compile error throws
   * {@link GPUShaderCompilationError} carrying the compiler message and the first line:column.
   */
  createShaderModule(descriptor: GPUShaderModuleDescriptor): GPUShaderModuleImpl {
    this.ensureAlive("createShaderModule");
    const n = this.ctx.native;
    const code = utf8(descriptor.code);
    const label = utf8(descriptor.label);
    const { value: h, error } = this.scoped(() => n.shim.zm_create_shader_module_wgsl(this.handle, code.bytes ?? new Uint8Array(1), code.len, label.bytes, label.len));
    if (error) {
      if (h) n.lib.wgpuShaderModuleRelease(h);
      throw new GPUShaderCompilationError(descriptor.label ?? "", error.message, parseWGSLDiagnostics(error.message));
    }
    if (!h) throw new Error(`createShaderModule: wgpu-native returned no module for '${descriptor.label ?? ""}'`);
    return new GPUShaderModuleImpl(this, h, descriptor.label ?? "");
  }

  /** Non-standard: a module with naga's runtime checks chosen by `checks` (wgpu.h
   * `wgpuDeviceCreateShaderModuleTrusted`; see {@link createShaderModuleTrusted} in shader.ts). */
  createShaderModuleTrusted(descriptor: GPUShaderModuleDescriptor, checks: ShaderRuntimeChecks): GPUShaderModuleImpl {
    return createShaderModuleTrusted(this as unknown as GPUDevice, descriptor, checks);
  }

  /** Spec createBindGroupLayout; only `buffer` entries (the compute subset). */
  createBindGroupLayout(descriptor: GPUBindGroupLayoutDescriptor): GPUBindGroupLayoutImpl {
    this.ensureAlive("createBindGroupLayout");
    const entries = Array.from(descriptor.entries);
    const flat = new BigUint64Array(Math.max(1, entries.length * 5));
    entries.forEach((e, i) => {
      if (e.sampler || e.texture || e.storageTexture || e.externalTexture) notSupported(`createBindGroupLayout: entry ${e.binding} (sampler/texture binding)`);
      if (!e.buffer) throw new TypeError(`createBindGroupLayout: entry ${e.binding} has no 'buffer' member`);
      const t = BUFFER_BINDING_TYPE[e.buffer.type ?? "uniform"];
      if (t === undefined) throw new TypeError(`createBindGroupLayout: entry ${e.binding}: unknown buffer type '${e.buffer.type}'`);
      flat.set([BigInt(e.binding), BigInt(e.visibility), BigInt(t), e.buffer.hasDynamicOffset ? 1n : 0n, BigInt(e.buffer.minBindingSize ?? 0)], i * 5);
    });
    const label = utf8(descriptor.label);
    const h = this.ctx.native.shim.zm_create_bind_group_layout(this.handle, ptr(flat), entries.length, label.bytes, label.len);
    this.checkErrors(`createBindGroupLayout('${descriptor.label ?? ""}')`);
    return new GPUBindGroupLayoutImpl(this, h!, descriptor.label ?? "");
  }

  /** Spec createPipelineLayout, plus the non-standard `immediateSize` (bytes of `var<immediate>`
   * data, needs the `wgpu-immediates` feature; see GPUComputePassEncoderImpl.setImmediates). */
  createPipelineLayout(descriptor: GPUPipelineLayoutDescriptor): GPUPipelineLayoutImpl {
    this.ensureAlive("createPipelineLayout");
    const layouts = Array.from(descriptor.bindGroupLayouts);
    const handles = new BigUint64Array(Math.max(1, layouts.length));
    layouts.forEach((l, i) => {
      if (!(l instanceof GPUBindGroupLayoutImpl)) throw new TypeError(`createPipelineLayout: bindGroupLayouts[${i}] is not a GPUBindGroupLayout of this binding`);
      handles[i] = BigInt(l.handle as unknown as number);
    });
    const label = utf8(descriptor.label);
    const immediateSize = (descriptor as GPUPipelineLayoutDescriptor & { immediateSize?: number }).immediateSize ?? 0;
    const h = this.ctx.native.shim.zm_create_pipeline_layout(this.handle, ptr(handles), layouts.length, immediateSize, label.bytes, label.len);
    this.checkErrors(`createPipelineLayout('${descriptor.label ?? ""}')`);
    return new GPUPipelineLayoutImpl(this, h!, descriptor.label ?? "", layouts as GPUBindGroupLayoutImpl[]);
  }

  /** Spec createBindGroup; resources must be buffers (GPUBufferBinding or a GPUBuffer). */
  createBindGroup(descriptor: GPUBindGroupDescriptor): GPUBindGroupImpl {
    this.ensureAlive("createBindGroup");
    if (!(descriptor.layout instanceof GPUBindGroupLayoutImpl)) throw new TypeError("createBindGroup: layout is not a GPUBindGroupLayout of this binding");
    const entries = Array.from(descriptor.entries);
    const flat = new BigUint64Array(Math.max(1, entries.length * 4));
    const keep: GPUBufferImpl[] = [];
    entries.forEach((e, i) => {
      const r = e.resource as unknown;
      let buffer: unknown;
      let offset = 0;
      let size: bigint = WGPU_WHOLE_SIZE;
      if (r instanceof GPUBufferImpl) buffer = r;
      else if (r && typeof r === "object" && "buffer" in r) {
        const b = r as GPUBufferBinding;
        buffer = b.buffer;
        offset = Number(b.offset ?? 0);
        if (b.size !== undefined) size = BigInt(b.size);
      }
      if (!(buffer instanceof GPUBufferImpl)) notSupported(`createBindGroup: entry ${e.binding} resource (only buffers of this binding are supported)`);
      keep.push(buffer);
      flat.set([BigInt(e.binding), BigInt(buffer.handle as unknown as number), BigInt(offset), size], i * 4);
    });
    const label = utf8(descriptor.label);
    const h = this.ctx.native.shim.zm_create_bind_group(this.handle, descriptor.layout.handle, ptr(flat), entries.length, label.bytes, label.len);
    this.checkErrors(`createBindGroup('${descriptor.label ?? ""}')`);
    return new GPUBindGroupImpl(this, h!, descriptor.label ?? "", keep);
  }

  private buildComputePipeline(descriptor: GPUComputePipelineDescriptor): Pointer | null {
    const n = this.ctx.native;
    const module = descriptor.compute.module;
    if (!(module instanceof GPUShaderModuleImpl)) throw new TypeError("createComputePipeline: compute.module is not a GPUShaderModule of this binding");
    let layout: Pointer | null = null;
    if (descriptor.layout !== "auto") {
      if (!(descriptor.layout instanceof GPUPipelineLayoutImpl)) throw new TypeError("createComputePipeline: layout must be 'auto' or a GPUPipelineLayout of this binding");
      layout = descriptor.layout.handle;
    }
    const constants = Object.entries(descriptor.compute.constants ?? {});
    const keyParts = constants.map(([k]) => new TextEncoder().encode(k));
    const keyBytes = new Uint8Array(Math.max(1, keyParts.reduce((a, b) => a + b.length, 0)));
    const keyLens = new Uint32Array(Math.max(1, constants.length));
    const values = new Float64Array(Math.max(1, constants.length));
    let off = 0;
    keyParts.forEach((k, i) => {
      keyBytes.set(k, off);
      off += k.length;
      keyLens[i] = k.length;
      values[i] = constants[i][1];
    });
    const entry = utf8(descriptor.compute.entryPoint);
    const label = utf8(descriptor.label);
    return n.shim.zm_create_compute_pipeline(this.handle, layout, module.handle, entry.bytes, entry.len, ptr(keyBytes), ptr(keyLens), ptr(values), constants.length, label.bytes, label.len);
  }

  /** Spec createComputePipeline (explicit layout or `layout: "auto"`). Invalid pipelines raise an
   * uncaptured error (thrown unless listened for, see the file comment). */
  createComputePipeline(descriptor: GPUComputePipelineDescriptor): GPUComputePipelineImpl {
    this.ensureAlive("createComputePipeline");
    const h = this.buildComputePipeline(descriptor);
    this.checkErrors(`createComputePipeline('${descriptor.label ?? ""}')`);
    return new GPUComputePipelineImpl(this, h!, descriptor.label ?? "");
  }

  /** Spec createComputePipelineAsync: resolves with the pipeline or rejects with a GPUPipelineError
   * (reason "validation" or "internal"). wgpu-native does not implement the async entry point, so
   * the pipeline is built synchronously inside error scopes. */
  async createComputePipelineAsync(descriptor: GPUComputePipelineDescriptor): Promise<GPUComputePipelineImpl> {
    this.ensureAlive("createComputePipelineAsync");
    const { value: h, error } = this.scoped(() => this.buildComputePipeline(descriptor));
    if (error) {
      if (h) this.ctx.native.lib.wgpuComputePipelineRelease(h);
      throw new GPUPipelineErrorImpl(`createComputePipelineAsync('${descriptor.label ?? ""}'): ${error.message}`, { reason: error.type === 2 ? "validation" : "internal" });
    }
    return new GPUComputePipelineImpl(this, h!, descriptor.label ?? "");
  }

  /** Spec createCommandEncoder. */
  createCommandEncoder(descriptor: GPUCommandEncoderDescriptor = {}): GPUCommandEncoderImpl {
    this.ensureAlive("createCommandEncoder");
    const label = utf8(descriptor.label);
    const h = this.ctx.native.shim.zm_create_command_encoder(this.handle, label.bytes, label.len);
    this.checkErrors("createCommandEncoder");
    return new GPUCommandEncoderImpl(this, h!, descriptor.label ?? "");
  }

  /** Spec createQuerySet ("timestamp" needs the `timestamp-query` feature; "occlusion" is render-only
   * but creatable). */
  createQuerySet(descriptor: GPUQuerySetDescriptor): GPUQuerySetImpl {
    this.ensureAlive("createQuerySet");
    const t = QUERY_TYPE[descriptor.type];
    if (t === undefined) throw new TypeError(`createQuerySet: unknown type '${descriptor.type}'`);
    if (descriptor.type === "timestamp" && !this.features.has("timestamp-query")) {
      throw new TypeError("createQuerySet: type 'timestamp' needs the 'timestamp-query' feature on the device");
    }
    const label = utf8(descriptor.label);
    const h = this.ctx.native.shim.zm_create_query_set(this.handle, t, descriptor.count, label.bytes, label.len);
    this.checkErrors(`createQuerySet('${descriptor.label ?? ""}')`);
    return new GPUQuerySetImpl(this, h!, descriptor.type, descriptor.count, descriptor.label ?? "");
  }

  /** Spec destroy: loses the device (reason "destroyed"); `lost` resolves. Idempotent. */
  destroy(): undefined {
    if (this.lostInfo) return undefined;
    this.ctx.native.lib.wgpuDeviceDestroy(this.handle);
    this.ctx.native.lib.wgpuInstanceProcessEvents(this.ctx.instance);
    if (!this.lostError("destroy")) {
      // wgpu-native fires the lost callback while dropping; record the loss ourselves meanwhile.
      this.lostInfo = { __brand: "GPUDeviceLostInfo", reason: "destroyed", message: "device.destroy() was called" } as GPUDeviceLostInfo;
      this.resolveLost(this.lostInfo);
    }
    return undefined;
  }

  /** Non-standard: poll the device (wgpuDevicePoll); `wait` blocks until the queue is empty.
   * Returns true when no submission is in flight. */
  poll(wait = false): boolean {
    // wgpu-native aborts the process when polling a lost device fails: refuse in JS instead.
    this.ensureAlive("poll");
    return this.ctx.native.shim.zm_device_poll(this.handle, wait ? 1 : 0, 0) !== 0;
  }

  // ---- outside the compute subset --------------------------------------------------------------
  createTexture(): never {
    return notSupported("GPUDevice.createTexture");
  }
  createSampler(): never {
    return notSupported("GPUDevice.createSampler");
  }
  importExternalTexture(): never {
    return notSupported("GPUDevice.importExternalTexture");
  }
  createRenderPipeline(): never {
    return notSupported("GPUDevice.createRenderPipeline");
  }
  createRenderPipelineAsync(): Promise<never> {
    return Promise.reject(new Error("GPUDevice.createRenderPipelineAsync is not supported: kernels/src/ffi implements the compute subset of WebGPU only"));
  }
  createRenderBundleEncoder(): never {
    return notSupported("GPUDevice.createRenderBundleEncoder");
  }
}
