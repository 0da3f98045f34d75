/**
 * Optional per-kernel GPU time from timestamp queries (WebGPU `timestamp-query` feature, compute
 * pass `timestampWrites`). When the backend is created with `profile: true`, every dispatch runs in
 * its own compute pass whose begin and end timestamps land in a query set; at submit the batch's
 * queries are resolved into a buffer, copied to a mappable one and read asynchronously, and the
 * durations are summed per kernel label. One pass per dispatch costs some speed, so this is for
 * measurement runs only. Timestamps are nanoseconds on the GPU's clock (WebGPU spec §"Timestamp
 * Query"; implementations may quantise them).
 */
import { BufferUsage, MapMode } from "./constants.ts";

/** Total GPU time and dispatch count of one kernel label. */
export interface KernelTime {
  label: string;
  dispatches: number;
  /** Sum of (end − begin) over its passes, nanoseconds. */
  ns: number;
}

/** Records pass timestamps per batch and accumulates them per label. */
export class GpuProfiler {
  private readonly querySet: GPUQuerySet;
  private readonly resolve: GPUBuffer;
  private labels: string[] = [];
  private readonly totals = new Map<string, KernelTime>();
  private readonly pending: Promise<void>[] = [];

  constructor(
    private readonly device: GPUDevice,
    /** Dispatches per batch (the batcher submits before exceeding it). */
    readonly capacity: number,
  ) {
    if (!device.features.has("timestamp-query")) throw new Error("webgpu profile: the device lacks the 'timestamp-query' feature (create the backend without profile: true)");
    this.querySet = device.createQuerySet({ type: "timestamp", count: 2 * capacity, label: "zeromoe profiler" });
    this.resolve = device.createBuffer({ size: 16 * capacity, usage: BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC, label: "zeromoe profiler resolve" });
  }

  /** Whether the current batch has no room for another timed dispatch. */
  get full(): boolean {
    return this.labels.length >= this.capacity;
  }

  /** Timestamp writes for the next dispatch's pass, labelled `label`. */
  next(label: string): GPUComputePassTimestampWrites {
    const i = this.labels.length;
    this.labels.push(label);
    return { querySet: this.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 };
  }

  /** Record the resolve of this batch's queries into `enc` (call before finishing the batch);
   * returns a function to call after the batch is submitted. */
  finishBatch(enc: GPUCommandEncoder): (() => void) | null {
    const n = this.labels.length;
    if (n === 0) return null;
    const labels = this.labels;
    this.labels = [];
    const bytes = 16 * n;
    const read = this.device.createBuffer({ size: bytes, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST, label: "zeromoe profiler readback" });
    enc.resolveQuerySet(this.querySet, 0, 2 * n, this.resolve, 0);
    enc.copyBufferToBuffer(this.resolve, 0, read, 0, bytes);
    return () => {
      this.pending.push(
        read.mapAsync(MapMode.READ, 0, bytes).then(() => {
          const t = new BigUint64Array(read.getMappedRange(0, bytes).slice(0));
          read.unmap();
          read.destroy();
          for (let i = 0; i < n; i++) {
            const d = t[2 * i + 1]! > t[2 * i]! ? Number(t[2 * i + 1]! - t[2 * i]!) : 0;
            const k = this.totals.get(labels[i]!) ?? { label: labels[i]!, dispatches: 0, ns: 0 };
            k.dispatches++;
            k.ns += d;
            this.totals.set(labels[i]!, k);
          }
        }),
      );
    };
  }

  /** Per-label totals of everything submitted so far, longest first (waits for pending reads). */
  async report(): Promise<KernelTime[]> {
    await Promise.all(this.pending.splice(0));
    return [...this.totals.values()].sort((a, b) => b.ns - a.ns);
  }

  /** Forget the totals. */
  reset(): void {
    this.totals.clear();
  }
}
