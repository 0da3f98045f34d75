/**
 * Timing of GPU work recorded into compute passes.
 *
 * With the `timestamp-query` feature, every repetition runs in its own compute pass whose beginning
 * and end write timestamps (W3C WebGPU §"Timestamp Query"); the GPU duration of each pass is read
 * back and the median taken. Without it (or when the implementation rejects timestamp writes), the
 * wall clock is read around a batch of repetitions submitted together and closed by a 4-byte
 * readback, which waits for all of them; the per-repetition time of each batch is recorded and the
 * median of the batches taken. Both ways warm up first.
 */

/** Result of {@link timeGpu}: seconds per repetition. */
export interface GpuTiming {
  /** Median seconds per repetition. */
  seconds: number;
  /** "timestamp" (GPU timestamps per pass) or "wall" (host clock around batches). */
  method: "timestamp" | "wall";
  /** Number of timed repetitions (timestamp) or batches (wall). */
  samples: number;
  /** Repetitions per submitted batch. */
  repsPerBatch: number;
}

/** Options of {@link timeGpu}. */
export interface GpuTimingOptions {
  /** Wall-clock target per timed batch, seconds (the batch size is derived from it). Default 0.05. */
  targetBatchSeconds?: number;
  /** Timed batches (wall) or timed batches of passes (timestamp). Default 5. */
  batches?: number;
  /** Most repetitions per batch. Default 200. */
  maxReps?: number;
  /** Seconds of repeated batches before timing starts. Default 0.3. */
  warmupSeconds?: number;
  /** Try timestamp queries when the device has `timestamp-query`. Default true. */
  timestamps?: boolean;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) >> 1]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}

/** Waits until all work submitted so far on `device.queue` has finished, by reading 4 bytes back. */
export async function gpuSync(device: GPUDevice, probe: GPUBuffer): Promise<void> {
  const rb = device.createBuffer({ size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(probe, 0, rb, 0, 4);
  device.queue.submit([enc.finish()]);
  await rb.mapAsync(GPUMapMode.READ);
  rb.unmap();
  rb.destroy();
}

/**
 * Times `record`, which records ONE repetition of the work into the given compute pass.
 * `probe` is any buffer with COPY_SRC usage and at least 4 bytes (used to wait for completion).
 * Returns the median seconds per repetition. Throws whatever the device throws while recording.
 */
export async function timeGpu(device: GPUDevice, probe: GPUBuffer, record: (pass: GPUComputePassEncoder) => void, opts: GpuTimingOptions = {}): Promise<GpuTiming> {
  const target = opts.targetBatchSeconds ?? 0.05;
  const batches = opts.batches ?? 5;
  const maxReps = opts.maxReps ?? 200;
  const runBatch = async (reps: number): Promise<number> => {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    for (let r = 0; r < reps; r++) record(pass);
    pass.end();
    const t0 = performance.now();
    device.queue.submit([enc.finish()]);
    await gpuSync(device, probe);
    return (performance.now() - t0) / 1000;
  };
  // warm up (pipeline creation, first touch, and GPU clocks, which drop while the host prepares
  // data and take a few hundred milliseconds of load to come back), then size the batch
  await runBatch(1);
  const one = await runBatch(1);
  const reps = Math.max(1, Math.min(maxReps, Math.ceil(target / Math.max(one, 1e-6))));
  const warmUntil = performance.now() + 1000 * (opts.warmupSeconds ?? 0.3);
  do await runBatch(reps); while (performance.now() < warmUntil);

  if ((opts.timestamps ?? true) && device.features.has("timestamp-query")) {
    try {
      const samples: number[] = [];
      // One query set per call, released by the garbage collector: with wgpu-native 29 an explicit
      // destroy() followed by the final release panics in wgpu-core ("Cannot remove a vacant resource").
      const qs = device.createQuerySet({ type: "timestamp", count: 2 * reps });
      // wgpu-native resolves raw ticks; its GPUQueue exposes the tick length (ns) as a non-standard method.
      const q = device.queue as GPUQueue & { getTimestampPeriod?: () => number };
      const period = typeof q.getTimestampPeriod === "function" ? q.getTimestampPeriod() : 1;
      for (let b = 0; b < batches; b++) {
        const bytes = 16 * reps;
        const resolve = device.createBuffer({ size: bytes, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
        const rb = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
        const enc = device.createCommandEncoder();
        for (let r = 0; r < reps; r++) {
          const pass = enc.beginComputePass({ timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 2 * r, endOfPassWriteIndex: 2 * r + 1 } });
          record(pass);
          pass.end();
        }
        enc.resolveQuerySet(qs, 0, 2 * reps, resolve, 0);
        enc.copyBufferToBuffer(resolve, 0, rb, 0, bytes);
        device.queue.submit([enc.finish()]);
        await rb.mapAsync(GPUMapMode.READ);
        const ts = new BigUint64Array(rb.getMappedRange().slice(0));
        rb.unmap();
        for (let r = 0; r < reps; r++) {
          const d = (Number(ts[2 * r + 1]! - ts[2 * r]!) * period) / 1e9;
          if (d > 0) samples.push(d);
        }
        rb.destroy(); resolve.destroy();
      }
      if (samples.length >= Math.max(1, reps)) return { seconds: median(samples), method: "timestamp", samples: samples.length, repsPerBatch: reps };
    } catch {
      // fall through to the wall clock
    }
  }
  const per: number[] = [];
  for (let b = 0; b < batches; b++) per.push((await runBatch(reps)) / reps);
  return { seconds: median(per), method: "wall", samples: per.length, repsPerBatch: reps };
}
