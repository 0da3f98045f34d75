/**
 * Command batching: many dispatches recorded into one command encoder (one open compute pass),
 * submitted when the host needs a result ({@link CommandBatcher.submit}), when a batch reaches its
 * length limit, or before a host write that must not overtake recorded work.
 *
 * Freed buffers are recycled through a {@link BufferPool} (buffer-pool.ts): a buffer freed while the
 * unsubmitted batch uses it waits ("cooling") until that batch is submitted; a buffer taken from the
 * pool is zeroed by a `clearBuffer` in a prologue command buffer submitted just ahead of the batch
 * (so clears never split the batch's compute pass). Queue order makes both safe: the previous
 * owner's commands were submitted earlier, the new owner's come later. A host write to a buffer
 * whose clear is pending cancels the clear when it covers the whole buffer, and otherwise submits
 * the clear first ({@link CommandBatcher.beforeWrite}): `queue.writeBuffer` data is applied at the
 * start of the next submit, before any command of it.
 *
 * Uniform parameters of all dispatches of a batch live in one arena: a host ArrayBuffer of
 * 256-byte slots (`minUniformBufferOffsetAlignment`), uploaded with `queue.writeBuffer` just before
 * the batch is submitted. Queue operations are ordered, so the one GPU uniform buffer can be reused
 * by the next batch. Readbacks use a pool of MAP_READ staging buffers.
 */
import { BufferUsage, MapMode } from "./constants.ts";
import { BindGroupCache } from "./bindgroups.ts";
import { BufferPool } from "./buffer-pool.ts";
import type { GpuProfiler } from "./profiler.ts";
import type { GpuTimeline, SubmitReason } from "./timeline.ts";
import type { CachedPipeline } from "./pipelines.ts";

/** Bytes per uniform slot (one dispatch's params). */
export const UNIFORM_SLOT_BYTES = 256;

/** Dispatches of the first batch after the queue drained (a host read or flush returned) while
 * early submits are on; each later batch may hold twice as many, up to `submitAfter`. */
export const SUBMIT_RAMP_START = 4;

/** Records dispatches and copies, submits them in batches, reads buffers back. */
export class CommandBatcher {
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private readonly arena: ArrayBuffer;
  private readonly arenaU32: Uint32Array;
  private readonly arenaI32: Int32Array;
  private readonly arenaF32: Float32Array;
  private readonly uniform: GPUBuffer;
  private slotsUsed = 0;
  private commands = 0;
  private readonly staging: GPUBuffer[] = [];
  /** GPUBuffers bound or copied by commands of the unsubmitted batch. */
  private readonly used = new Set<GPUBuffer>();
  /** Freed buffers the unsubmitted batch uses: recycled once it is submitted. */
  private readonly cooling: GPUBuffer[] = [];
  /** Buffers taken from the pool whose zeroing clear is still to be recorded (at submit). */
  private readonly pendingClears = new Set<GPUBuffer>();
  /** Freed buffers kept for reuse (buffer-pool.ts). */
  readonly pool: BufferPool;
  /** Stable small integer per GPUBuffer (bind-group cache keys survive reuse). */
  private readonly ids = new WeakMap<GPUBuffer, number>();
  private nextId = 1;
  /** Bind groups reused across dispatches (see bindgroups.ts). */
  readonly bindGroups = new BindGroupCache();
  private readonly dynOffset = new Uint32Array(1);
  /** Dispatches submitted since creation (for tests and reports). */
  dispatches = 0;
  /** Batches submitted since creation. */
  submits = 0;
  /** Host reads since creation: device→host copies the host waited for ({@link readBytes}). */
  reads = 0;
  /** Waits for the whole queue to go idle since creation ({@link finish}, i.e. backend flush). */
  waits = 0;
  /** Milliseconds the host spent awaiting reads and waits (GPU still busy, plus the event pump's
   * wake-up latency). */
  waitMs = 0;
  /** Milliseconds the host spent inside {@link submit} (ending the pass, finishing encoders, the
   * uniform upload, `queue.submit`). */
  submitMs = 0;
  /** Bytes of reused pooled buffers zeroed by clears since creation. */
  clearedBytes = 0;
  /** Freed GPUBuffers destroyed since creation (freed while the pool was full, or released from the
   * pool: {@link releasePool}). */
  destroyed = 0;
  /** Milliseconds the host spent in `GPUBuffer.destroy` of freed buffers. */
  destroyMs = 0;

  /** When set, each dispatch gets its own timed pass (profiler.ts). */
  profiler: GpuProfiler | null = null;
  /** When set, each submitted batch is timed on the GPU as a whole (timeline.ts). */
  timeline: GpuTimeline | null = null;
  /** Kernel labels of the open batch's first and last dispatch (for the timeline). */
  private firstLabel = "";
  private lastLabel = "";
  private batchDispatches = 0;
  /** Dispatches after which an open batch is submitted without waiting, so the device starts on
   * the first ops of a phase while the host still records the rest (host recording and device
   * execution overlap, as CUDA's asynchronous launches do). Defaults to `maxBatch` (no early
   * submit); the backend sets its own default. When it is below `maxBatch`, the batches after the
   * queue drained ramp up to it ({@link SUBMIT_RAMP_START}, twice that, …): the idle device gets
   * its first work after a few dispatches of recording instead of `submitAfter` of them (on the
   * H200 the host records a dispatch in ~40–65 µs: 32 of them left the GPU idle ~2 ms at the start
   * of every llama-small step, 7 % of it). */
  submitAfter: number;
  /** The ramp's limit for the open batch (0: not ramping, `submitAfter` applies). */
  private rampLimit = 0;

  constructor(
    private readonly device: GPUDevice,
    /** Dispatches per batch before an automatic submit. */
    readonly maxBatch = 512,
    /** Most bytes of freed buffers kept for reuse (0: destroy every freed buffer). */
    poolBytes = 0,
  ) {
    this.pool = new BufferPool(poolBytes, (b) => this.idOf(b));
    this.submitAfter = maxBatch;
    this.arena = new ArrayBuffer(maxBatch * UNIFORM_SLOT_BYTES);
    this.arenaU32 = new Uint32Array(this.arena);
    this.arenaI32 = new Int32Array(this.arena);
    this.arenaF32 = new Float32Array(this.arena);
    this.uniform = device.createBuffer({ label: "zeromoe params arena", size: this.arena.byteLength, usage: BufferUsage.UNIFORM | BufferUsage.COPY_DST });
  }

  /** Whether commands are recorded but not yet submitted. */
  get pending(): boolean {
    return this.commands > 0;
  }

  private enc(): GPUCommandEncoder {
    if (!this.encoder) this.encoder = this.device.createCommandEncoder({ label: "zeromoe batch" });
    return this.encoder;
  }

  private endPass(): void {
    if (this.pass) {
      this.pass.end();
      this.pass = null;
      this.passPipeline = null;
    }
  }

  /** The pipeline last set in the open pass. */
  private passPipeline: GPUComputePipeline | null = null;

  /**
   * Record one dispatch of `p` with `storage` bound at bindings 1…k and `params` (each value with
   * its WGSL type) in the batch's uniform arena. `grid` is the workgroup count per dimension.
   * `storageIds` identify the storage buffers (bind-group cache key; see bindgroups.ts).
   */
  dispatch(label: string, p: CachedPipeline, storage: readonly GPUBuffer[], storageIds: readonly number[], params: readonly number[], types: readonly ("u32" | "i32" | "f32")[], grid: readonly [number, number, number]): void {
    if (grid[0] === 0 || grid[1] === 0 || grid[2] === 0) return;
    if (this.slotsUsed >= this.maxBatch || this.profiler?.full) this.submit("full");
    const slot = this.slotsUsed++;
    const base = (slot * UNIFORM_SLOT_BYTES) / 4;
    for (let i = 0; i < params.length; i++) {
      const v = params[i]!;
      const t = types[i]!;
      if (t === "f32") this.arenaF32[base + i] = v;
      else if (t === "i32") this.arenaI32[base + i] = v;
      else {
        if (!(v >= 0 && v <= 0xffffffff)) throw new Error(`${label}: u32 parameter ${i} out of range: ${v}`);
        this.arenaU32[base + i] = v;
      }
    }
    const bg = this.bindGroups.get(p.id, storageIds, () => {
      const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: this.uniform, offset: 0, size: UNIFORM_SLOT_BYTES } }];
      storage.forEach((b, i) => entries.push({ binding: i + 1, resource: { buffer: b } }));
      return this.device.createBindGroup({ label, layout: p.layout, entries });
    });
    for (const b of storage) this.used.add(b);
    if (this.profiler) {
      this.endPass();
      this.pass = this.enc().beginComputePass({ label, timestampWrites: this.profiler.next(label) });
    } else if (!this.pass) this.pass = this.enc().beginComputePass({ label: "zeromoe pass" });
    if (this.passPipeline !== p.pipeline || this.profiler) {
      this.pass.setPipeline(p.pipeline); // a pass keeps its pipeline: consecutive dispatches of one kernel set it once
      this.passPipeline = p.pipeline;
    }
    this.dynOffset[0] = slot * UNIFORM_SLOT_BYTES;
    this.pass.setBindGroup(0, bg, this.dynOffset, 0, 1);
    this.pass.dispatchWorkgroups(grid[0], grid[1], grid[2]);
    this.commands++;
    this.dispatches++;
    if (this.timeline) {
      if (this.batchDispatches++ === 0) this.firstLabel = label;
      this.lastLabel = label;
    }
    if (this.slotsUsed >= (this.rampLimit || this.submitAfter)) this.submit("auto");
  }

  /** Record a buffer-to-buffer copy (offsets and size multiples of 4, distinct buffers). */
  copy(src: GPUBuffer, srcOff: number, dst: GPUBuffer, dstOff: number, size: number): void {
    if (size === 0) return;
    this.endPass();
    this.enc().copyBufferToBuffer(src, srcOff, dst, dstOff, size);
    this.used.add(src);
    this.used.add(dst);
    this.commands++;
  }

  /** Submit everything recorded (no-op when nothing is), preceded by the pending clears of reused
   * buffers. Does not wait. `reason` says why (for the timeline). */
  submit(reason: SubmitReason = "other"): void {
    const t0 = performance.now();
    this.endPass();
    const cbs: GPUCommandBuffer[] = [];
    let clearBytes = 0;
    if (this.pendingClears.size > 0) {
      const pro = this.device.createCommandEncoder({ label: "zeromoe clears" });
      for (const b of this.pendingClears) {
        pro.clearBuffer(b);
        clearBytes += b.size;
      }
      this.pendingClears.clear();
      cbs.push(pro.finish());
      this.clearedBytes += clearBytes;
    }
    let afterSubmit: (() => void) | null = null;
    if (this.encoder) {
      afterSubmit = this.profiler?.finishBatch(this.encoder) ?? null;
      cbs.push(this.encoder.finish());
      this.encoder = null;
    }
    if (cbs.length > 0) {
      if (this.slotsUsed > 0) this.device.queue.writeBuffer(this.uniform, 0, this.arena, 0, this.slotsUsed * UNIFORM_SLOT_BYTES);
      const marks = this.timeline?.bracket() ?? null;
      this.device.queue.submit(marks ? [marks.before, ...cbs, marks.after] : cbs);
      afterSubmit?.();
      this.submits++;
      const t1 = performance.now();
      this.submitMs += t1 - t0;
      this.timeline?.record({ hostSubmitMs: t1, hostSubmitCostMs: t1 - t0, dispatches: this.batchDispatches, firstLabel: this.firstLabel, lastLabel: this.lastLabel, reason, clearBytes }, marks !== null);
    } else this.submitMs += performance.now() - t0;
    if (this.rampLimit > 0 && this.slotsUsed > 0) {
      this.rampLimit *= 2;
      if (this.rampLimit >= this.submitAfter) this.rampLimit = 0;
    }
    this.batchDispatches = 0;
    this.firstLabel = "";
    this.lastLabel = "";
    this.slotsUsed = 0;
    this.commands = 0;
    this.used.clear();
    for (const b of this.cooling) this.keepOrDestroy(b);
    this.cooling.length = 0;
  }

  /** The stable id of GPUBuffer `b` (bind-group cache key). */
  idOf(b: GPUBuffer): number {
    let id = this.ids.get(b);
    if (id === undefined) {
      id = this.nextId++;
      this.ids.set(b, id);
    }
    return id;
  }

  /** A pooled buffer of exactly `bytes` bytes — when `zero`, zeroed ahead of the next batch,
   * else with whatever it held — or null when the pool has none. */
  reuse(bytes: number, zero = true): GPUBuffer | null {
    const b = this.pool.take(bytes);
    if (b && zero) this.pendingClears.add(b);
    return b;
  }

  /** A buffer the program freed: pooled (or destroyed when the pool is full) once no unsubmitted
   * command uses it. */
  recycle(b: GPUBuffer): void {
    if (this.used.has(b)) this.cooling.push(b); // a pending clear stays: recorded work relies on it
    else {
      this.pendingClears.delete(b); // nothing used it: it is cleared again when next taken
      this.keepOrDestroy(b);
    }
  }

  private keepOrDestroy(b: GPUBuffer): void {
    if (!this.pool.give(b)) this.destroyFreed(b);
  }

  /** Destroy every pooled buffer (as {@link destroyFreed}) and return the bytes released. */
  releasePool(): number {
    const bytes = this.pool.bytes;
    for (const b of this.pool.drain()) this.destroyFreed(b);
    return bytes;
  }

  /** Destroy a buffer the program freed: its cached bind groups go with it, and it is counted in
   * {@link destroyed} / {@link destroyMs}. */
  private destroyFreed(b: GPUBuffer): void {
    this.bindGroups.forget(this.idOf(b));
    const t0 = performance.now();
    b.destroy();
    this.destroyMs += performance.now() - t0;
    this.destroyed++;
  }

  /**
   * Call before `queue.writeBuffer` of `size` bytes at byte `offset` into `b` (a program buffer):
   * submits recorded work that must not see the new data first (a batch using `b`, or a pending
   * clear of `b` that the write does not fully cover); a whole-buffer write cancels the clear.
   */
  beforeWrite(b: GPUBuffer, offset: number, size: number): void {
    if (this.pendingClears.has(b)) {
      if (offset === 0 && size >= b.size) this.pendingClears.delete(b);
      else this.submit("write");
    } else if (this.used.has(b)) this.submit("write");
  }

  /** Whether the unsubmitted batch references `b`. */
  uses(b: GPUBuffer): boolean {
    return this.used.has(b);
  }


  /** Submit and wait until the queue is idle. */
  async finish(): Promise<void> {
    this.waits++;
    this.submit("finish");
    const mark = this.submits;
    const t0 = performance.now();
    try {
      await this.device.queue.onSubmittedWorkDone();
    } finally {
      this.waitMs += performance.now() - t0;
    }
    this.drained(mark);
  }

  /** The host waited for everything submitted up to submit number `mark`: when nothing was
   * submitted since (a read that was not awaited at once may resolve after later submits), the
   * device is idle, so the next batches ramp up (see {@link submitAfter}). */
  private drained(mark: number): void {
    if (this.submits === mark && this.submitAfter < this.maxBatch && SUBMIT_RAMP_START < this.submitAfter) this.rampLimit = SUBMIT_RAMP_START;
  }

  /** Copy `size` bytes (multiple of 4) from `src` at `srcOff` (multiple of 4) to the host, after all
   * recorded work. Returns a fresh ArrayBuffer. */
  async readBytes(src: GPUBuffer, srcOff: number, size: number): Promise<ArrayBuffer> {
    this.reads++;
    if (size === 0) {
      await this.finish();
      return new ArrayBuffer(0);
    }
    const st = this.takeStaging(size);
    this.copy(src, srcOff, st, 0, size);
    this.submit("read");
    const mark = this.submits;
    const t0 = performance.now();
    try {
      try {
        await st.mapAsync(MapMode.READ, 0, size);
      } finally {
        this.waitMs += performance.now() - t0;
      }
      const out = st.getMappedRange(0, size).slice(0);
      st.unmap();
      this.giveStaging(st);
      this.drained(mark);
      return out;
    } catch (e) {
      st.destroy();
      throw e;
    }
  }

  private takeStaging(size: number): GPUBuffer {
    const i = this.staging.findIndex((b) => b.size >= size);
    if (i >= 0) return this.staging.splice(i, 1)[0]!;
    const sz = Math.max(4096, 2 ** Math.ceil(Math.log2(size)));
    return this.device.createBuffer({ label: "zeromoe staging", size: sz, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST });
  }

  private giveStaging(b: GPUBuffer): void {
    // keep a few, and not huge ones (bounded host-visible memory)
    if (this.staging.length < 8 && b.size <= 64 * 1024 * 1024) this.staging.push(b);
    else b.destroy();
  }

  /** Release the staging buffers, the pooled buffers, the uniform arena and the timeline's queries. */
  destroy(): void {
    for (const b of this.staging) b.destroy();
    this.staging.length = 0;
    for (const b of this.pool.drain()) b.destroy();
    this.uniform.destroy();
    this.timeline?.destroy();
  }
}
