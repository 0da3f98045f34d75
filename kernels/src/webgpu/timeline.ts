/**
 * Optional submission timeline: when the backend is created with `timeline: true`, every command
 * batch the batcher submits (commands.ts) is bracketed by two empty compute passes whose
 * `timestampWrites` record when the GPU started and finished it, and the host records when it
 * submitted it, how many dispatches it held, why it was submitted and how many bytes of pooled
 * buffers it cleared. The gap between one batch's GPU end and the next batch's GPU start is time the
 * GPU had nothing queued (it idled, waiting for the host); the host side says what the host did in
 * between. Unlike the per-dispatch profiler (profiler.ts) this keeps the batches as they are (one
 * compute pass per batch), so it measures the real step.
 *
 * Timestamps are the GPU's clock in nanoseconds (WebGPU spec §"Timestamp Query"), meaningful only
 * as differences; host times are `performance.now()` milliseconds. Each batch's four queries are
 * resolved into its own 256-byte slot of one buffer (resolveQuerySet's destination offset must be a
 * multiple of 256); {@link GpuTimeline.report} reads the slots back once. Batches after the
 * capacity is used up are counted but not timed.
 */
import { BufferUsage, MapMode } from "./constants.ts";

/** Why the batcher submitted a batch. */
export type SubmitReason = "auto" | "full" | "read" | "write" | "finish" | "other";

/** One submitted batch on the timeline. */
export interface BatchTiming {
  /** Host time (performance.now(), ms) right after `queue.submit` returned. */
  hostSubmitMs: number;
  /** Host ms spent inside the batcher's submit (ending the pass, finishing the encoders, the
   * uniform upload and `queue.submit`). */
  hostSubmitCostMs: number;
  /** Dispatches in the batch. */
  dispatches: number;
  /** Kernel labels of the batch's first and last dispatch ("" when it had none: copies or clears only). */
  firstLabel: string;
  lastLabel: string;
  reason: SubmitReason;
  /** Bytes of reused pooled buffers zeroed by the batch's prologue. */
  clearBytes: number;
  /** GPU timestamps (ns, the GPU's clock) of the batch's start and end; NaN when not timed. */
  gpuBeginNs: number;
  gpuEndNs: number;
}

/** Records per-batch GPU begin/end timestamps and host submit facts. */
export class GpuTimeline {
  private readonly querySet: GPUQuerySet;
  private readonly resolve: GPUBuffer;
  private readonly batches: { b: BatchTiming; slot: number }[] = [];
  private slot = 0;

  constructor(
    private readonly device: GPUDevice,
    /** Batches timed at most (4 queries each; WebGPU allows 4096 queries per set). */
    readonly capacity = 1024,
  ) {
    if (!device.features.has("timestamp-query")) throw new Error("webgpu timeline: the device lacks the 'timestamp-query' feature (create the backend without timeline: true)");
    if (!(Number.isInteger(capacity) && capacity >= 1 && capacity <= 1024)) throw new Error(`webgpu timeline: capacity must be an integer in [1, 1024], got ${capacity}`);
    this.querySet = device.createQuerySet({ type: "timestamp", count: 4 * capacity, label: "zeromoe timeline" });
    this.resolve = device.createBuffer({ size: 256 * capacity, usage: BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC, label: "zeromoe timeline resolve" });
  }

  /** Command buffers to submit before and after a batch: the GPU-start marker (`before`) and the
   * GPU-end marker with the resolve of both queries (`after`); null when the capacity is used up. */
  bracket(): { before: GPUCommandBuffer; after: GPUCommandBuffer } | null {
    if (this.slot >= this.capacity) return null;
    const i = this.slot++;
    const b = this.device.createCommandEncoder({ label: "zeromoe timeline begin" });
    // each marker pass writes both of its timestamps (wgpu-native 29 rejects a pass whose other
    // index is left undefined): the batch spans from the first marker's begin to the second's end
    b.beginComputePass({ label: "timeline begin", timestampWrites: { querySet: this.querySet, beginningOfPassWriteIndex: 4 * i, endOfPassWriteIndex: 4 * i + 1 } }).end();
    const a = this.device.createCommandEncoder({ label: "zeromoe timeline end" });
    a.beginComputePass({ label: "timeline end", timestampWrites: { querySet: this.querySet, beginningOfPassWriteIndex: 4 * i + 2, endOfPassWriteIndex: 4 * i + 3 } }).end();
    a.resolveQuerySet(this.querySet, 4 * i, 4, this.resolve, 256 * i);
    return { before: b.finish(), after: a.finish() };
  }

  /** Note a submitted batch; `timed`: it was bracketed by the last {@link bracket}. */
  record(b: Omit<BatchTiming, "gpuBeginNs" | "gpuEndNs">, timed: boolean): void {
    this.batches.push({ b: { ...b, gpuBeginNs: NaN, gpuEndNs: NaN }, slot: timed ? this.slot - 1 : -1 });
  }

  /** Every batch recorded since creation (or {@link reset}), with GPU times filled in. The caller
   * must have waited for the queue (the backend's `timeline()` flushes first). */
  async report(): Promise<BatchTiming[]> {
    const n = this.slot;
    if (n > 0) {
      const bytes = 256 * n;
      const read = this.device.createBuffer({ size: bytes, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST, label: "zeromoe timeline readback" });
      const enc = this.device.createCommandEncoder({ label: "zeromoe timeline readback" });
      enc.copyBufferToBuffer(this.resolve, 0, read, 0, bytes);
      this.device.queue.submit([enc.finish()]);
      await read.mapAsync(MapMode.READ, 0, bytes);
      const t = new BigUint64Array(read.getMappedRange(0, bytes).slice(0));
      read.unmap();
      read.destroy();
      for (const { b, slot } of this.batches) {
        if (slot < 0) continue;
        b.gpuBeginNs = Number(t[32 * slot]!);
        b.gpuEndNs = Number(t[32 * slot + 3]!);
      }
    }
    return this.batches.map(({ b }) => ({ ...b }));
  }

  /** Forget the batches recorded so far and start timing again from slot 0. */
  reset(): void {
    this.batches.length = 0;
    this.slot = 0;
  }

  /** Release the query set and the resolve buffer. */
  destroy(): void {
    this.querySet.destroy();
    this.resolve.destroy();
  }
}
