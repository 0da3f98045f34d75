/**
 * Device buffers of the webgpu backend and their per-tag accounting.
 *
 * A {@link Buf} of at most {@link BufferLedger.segElems} elements is one GPUBuffer (STORAGE |
 * COPY_SRC | COPY_DST), sized `length × bytes` rounded up to a multiple of 4 (16-bit dtypes hold two
 * elements per 32-bit word) and at least 4 bytes. A longer one is *segmented*: held in
 * ⌈length / segElems⌉ GPUBuffers ("segments") of `segElems` elements each (the last one shorter),
 * so no tensor is bounded by the device's largest binding. `segElems` is one element count for
 * every dtype (chosen from the 4-byte dtypes' limit), so an f32 master and its 16-bit copy of one
 * layout split at the same element offsets. Each segment is a {@link GpuBuf} of its own (a
 * *segment handle*: own id, own GPUBuffer, not in the accounts) that ops bind with rebased offsets
 * (webgpu/segments.ts); the segmented parent has no GPUBuffer of its own, and touching its `gpu`
 * throws, so no path can bind it whole by mistake.
 *
 * Accounting counts `length × DTYPE_BYTES[dtype]` per buffer (without padding, whatever its
 * segments), the same figure the cpu backend reports for the same program.
 */
import { DTYPE_BYTES, MEM_TAGS, type Buf, type DType, type MemTag, type MemoryStats, type View } from "../backend.ts";
import { BufferUsage } from "./constants.ts";

/** A webgpu buffer: {@link Buf} fields plus its GPUBuffer, or its segments when segmented. */
export class GpuBuf implements Buf {
  private g: GPUBuffer | null;
  /** Set by free (and on segment handles when their parent is freed). */
  freed = false;
  constructor(
    readonly dtype: DType,
    readonly length: number,
    public tag: MemTag,
    readonly id: number,
    gpu: GPUBuffer | null,
    /** Allocated size in bytes (multiple of 4; the sum over segments when segmented). */
    readonly byteSize: number,
    readonly owner: BufferLedger,
    /** The segment handles of a segmented buffer (segment i holds elements [i·S, (i+1)·S) with S =
     * {@link segStride}); null for a buffer held in one GPUBuffer. */
    readonly segments: readonly GpuBuf[] | null = null,
    /** Elements per segment (0 when not segmented). */
    readonly segStride = 0,
  ) {
    this.g = gpu;
  }

  /** The GPUBuffer (null once freed). Throws on a segmented buffer: bind its segments instead
   * (webgpu/segments.ts), so nothing binds it whole by mistake. */
  get gpu(): GPUBuffer | null {
    if (this.segments) throw new Error(`webgpu: buffer ${this.id} (${this.dtype}[${this.length}], tag ${this.tag}) is held in ${this.segments.length} segments of ${this.segStride} elements and cannot be bound whole (internal: the op must split it by segment)`);
    return this.g;
  }

  /** Detach the GPUBuffer (free). */
  take(): GPUBuffer {
    const g = this.g!;
    this.g = null;
    this.freed = true;
    return g;
  }
}

function zeroTags(): Record<MemTag, number> {
  const r = {} as Record<MemTag, number>;
  for (const t of MEM_TAGS) r[t] = 0;
  return r;
}

/** Bytes a buffer of `length` × `dtype` occupies on the device (padded to 4, at least 4). */
export function paddedBytes(dtype: DType, length: number): number {
  return Math.max(4, Math.ceil((length * DTYPE_BYTES[dtype]) / 4) * 4);
}

/** Elements per segment for a largest binding of `bytes`: the most 4-byte elements that fit,
 * rounded down to a multiple of 4 (so 16-bit segments are whole words and every segment boundary is
 * 16-byte aligned in every dtype), at least 4. */
export function segmentElems(bytes: number): number {
  return Math.max(4, Math.floor(bytes / 16) * 4);
}

/** Allocates GPUBuffers and keeps current/peak bytes per tag. */
export class BufferLedger {
  private readonly current = zeroTags();
  private readonly peak = zeroTags();
  private total = 0;
  private peakTotal = 0;
  private nextId = 1;
  /** GPUBuffers created by {@link alloc} since creation (each an FFI round trip and a driver
   * allocation). */
  creates = 0;
  /** Allocations held in several segments since creation (file doc). */
  segmentedAllocs = 0;
  /** Host milliseconds spent in `createBuffer` for those. */
  createMs = 0;
  /** Bytes of the GPUBuffers of live (allocated, not freed) buffers — padded sizes, pooled ones
   * excluded — and their high-water mark since creation (never reset; bounds the adaptive pool). */
  liveBytes = 0;
  maxLiveBytes = 0;

  /** Elements per segment: buffers longer than this are held in several GPUBuffers (file doc). */
  readonly segElems: number;

  constructor(
    private readonly device: GPUDevice,
    /** Largest buffer the device accepts and can bind whole (min of maxBufferSize and
     * maxStorageBufferBindingSize), bytes. */
    readonly maxBytes: number,
    /** Receives the message of an allocation the device refused after the fact (WebGPU reports
     * out-of-memory asynchronously, through an error scope); the backend throws it at the next
     * read/flush. */
    private readonly onDeferredError: (p: Promise<string | null>) => void = () => {},
    /** A recycled GPUBuffer of exactly the given byte size — when `zero`, already scheduled to be
     * zeroed before any later command (commands.ts `reuse`) — or null to create one. */
    private readonly reuse: (bytes: number, zero: boolean) => GPUBuffer | null = () => null,
    /** Largest binding the backend uses, bytes (≤ maxBytes; lower only to exercise segmentation
     * at small sizes: WebGpuBackendOptions.maxBindingBytes). */
    bindingBytes: number = maxBytes,
  ) {
    this.segElems = segmentElems(Math.min(maxBytes, bindingBytes));
  }

  /** New zeroed buffer: a recycled one (zeroed by a clear ahead of its first use) or a fresh one
   * (WebGPU zero-initialises). Its GPUBuffer must only be written through paths that order the
   * write after that clear (backend `write`, commands.ts `beforeWrite`). With `zero` false a
   * recycled buffer keeps its previous contents (no clear: the caller overwrites it). A length
   * above {@link segElems} gives a segmented buffer (file doc). Throws on bad length/dtype/tag, or
   * when the device refuses, naming bytes and tag. */
  alloc(dtype: DType, length: number, tag: MemTag, zero = true): GpuBuf {
    if (!Number.isInteger(length) || length < 0) throw new Error(`webgpu alloc: length must be a non-negative integer, got ${length} (dtype ${dtype}, tag ${tag})`);
    if (!(dtype in DTYPE_BYTES)) throw new Error(`webgpu alloc: unknown dtype "${dtype}" (expected f32|f16|bf16|i32|u32)`);
    if (!MEM_TAGS.includes(tag)) throw new Error(`webgpu alloc: unknown tag "${tag}" (expected ${MEM_TAGS.join("|")})`);
    const S = this.segElems;
    if (length <= S) {
      const bytes = paddedBytes(dtype, length);
      const gpu = this.gpuBuffer(bytes, zero, `${bytes} bytes (${length} × ${dtype}) for tag ${tag}`);
      this.add(tag, length * DTYPE_BYTES[dtype]);
      return new GpuBuf(dtype, length, tag, this.nextId++, gpu, bytes, this);
    }
    const count = Math.ceil(length / S);
    const segs: GpuBuf[] = [];
    let total = 0;
    try {
      for (let i = 0; i < count; i++) {
        const len = Math.min(S, length - i * S);
        const bytes = paddedBytes(dtype, len);
        const gpu = this.gpuBuffer(bytes, zero, `${bytes} bytes (segment ${i} of ${count}: ${len} of ${length} × ${dtype}) for tag ${tag}`);
        segs.push(new GpuBuf(dtype, len, tag, this.nextId++, gpu, bytes, this));
        total += bytes;
      }
    } catch (e) {
      for (const g of segs) {
        this.liveBytes -= g.byteSize;
        g.take().destroy();
      }
      throw e;
    }
    this.add(tag, length * DTYPE_BYTES[dtype]);
    this.segmentedAllocs++;
    return new GpuBuf(dtype, length, tag, this.nextId++, null, total, this, segs, S);
  }

  /** One GPUBuffer of `bytes` (a pooled one when the pool has that size), counted in liveBytes;
   * `what` names it in errors. */
  private gpuBuffer(bytes: number, zero: boolean, what: string): GPUBuffer {
    if (bytes > this.maxBytes) throw new Error(`webgpu alloc: ${what} exceed the device's largest bindable buffer of ${this.maxBytes} bytes`);
    const pooled = this.reuse(bytes, zero);
    if (pooled) {
      this.liveBytes += bytes;
      if (this.liveBytes > this.maxLiveBytes) this.maxLiveBytes = this.liveBytes;
      return pooled;
    }
    let gpu: GPUBuffer;
    const t0 = performance.now();
    this.device.pushErrorScope("out-of-memory");
    try {
      gpu = this.device.createBuffer({ size: bytes, usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC | BufferUsage.COPY_DST });
    } catch (e) {
      void this.device.popErrorScope();
      throw new Error(`webgpu alloc: device refused ${what}: ${(e as Error).message}`);
    }
    this.onDeferredError(this.device.popErrorScope().then((err) => (err ? `webgpu alloc: device refused ${what}: ${err.message}` : null)));
    this.creates++;
    this.createMs += performance.now() - t0;
    this.liveBytes += bytes;
    if (this.liveBytes > this.maxLiveBytes) this.maxLiveBytes = this.liveBytes;
    return gpu;
  }

  /** Release the buffer from the accounts and return its GPUBuffers (one, or one per segment),
   * which the caller recycles or destroys once the batch using them is submitted (commands.ts
   * `recycle`). */
  freeDeferred(buf: Buf): GPUBuffer[] {
    const b = this.own(buf, "free");
    this.add(b.tag, -b.length * DTYPE_BYTES[b.dtype]);
    this.liveBytes -= b.byteSize;
    if (b.segments) {
      b.freed = true;
      return b.segments.map((s) => s.take());
    }
    return [b.take()];
  }

  /** Move a live buffer's bytes to another tag. */
  retag(buf: Buf, tag: MemTag): void {
    const b = this.own(buf, "retag");
    if (!MEM_TAGS.includes(tag)) throw new Error(`webgpu retag: unknown tag "${tag}" (expected ${MEM_TAGS.join("|")})`);
    const bytes = b.length * DTYPE_BYTES[b.dtype];
    this.add(b.tag, -bytes);
    b.tag = tag;
    if (b.segments) for (const g of b.segments) g.tag = tag;
    this.add(tag, bytes);
  }

  /** Snapshot of current and peak bytes per tag. */
  memory(): MemoryStats {
    return { current: { ...this.current }, peak: { ...this.peak }, peakTotal: this.peakTotal };
  }

  /** Peaks := current values. */
  resetPeak(): void {
    for (const t of MEM_TAGS) this.peak[t] = this.current[t];
    this.peakTotal = this.total;
  }

  /** The live GpuBuf behind `buf`; throws naming `what` if it is foreign or freed. */
  own(buf: Buf, what: string): GpuBuf {
    if (!(buf instanceof GpuBuf) || buf.owner !== this) throw new Error(`webgpu ${what}: buffer ${buf?.id} does not belong to this webgpu backend`);
    if (buf.freed) throw new Error(`webgpu ${what}: buffer ${buf.id} (${buf.dtype}[${buf.length}], tag ${buf.tag}) was freed`);
    return buf;
  }

  /** Check that `view` is live and holds `n` elements from its offset, optionally of given dtypes.
   * Returns the GpuBuf, which may be segmented. Throws naming the op and argument. */
  check(v: View, n: number, op: string, arg: string, dtypes?: readonly DType[]): GpuBuf {
    if (!v || typeof v !== "object" || !v.buf) throw new Error(`webgpu ${op}: argument ${arg} is not a View {buf, off}`);
    const b = this.own(v.buf, `${op} (${arg})`);
    if (dtypes && !dtypes.includes(b.dtype)) throw new Error(`webgpu ${op}: ${arg} must be ${dtypes.join("|")}, got ${b.dtype}`);
    if (!Number.isInteger(v.off) || v.off < 0) throw new Error(`webgpu ${op}: ${arg}.off must be a non-negative integer, got ${v.off}`);
    if (!Number.isInteger(n) || n < 0) throw new Error(`webgpu ${op}: element count for ${arg} must be a non-negative integer, got ${n}`);
    if (v.off + n > b.length) throw new Error(`webgpu ${op}: ${arg} needs ${n} elements from offset ${v.off} but buffer ${b.id} holds ${b.length}`);
    return b;
  }

  /** {@link check} for a view an op binds as is: also throws when its buffer is segmented (the op
   * must have rebased it onto a segment first: webgpu/segments.ts). */
  view(v: View, n: number, op: string, arg: string, dtypes?: readonly DType[]): GpuBuf {
    const b = this.check(v, n, op, arg, dtypes);
    if (b.segments) throw new Error(`webgpu ${op}: ${arg} (elements [${v.off}, ${v.off + n}) of buffer ${b.id}, ${b.dtype}[${b.length}]) lies in a buffer held in ${b.segments.length} segments of ${b.segStride} elements, and ${op} does not split its operands across bindings`);
    return b;
  }

  private add(tag: MemTag, bytes: number): void {
    this.current[tag] += bytes;
    this.total += bytes;
    if (this.current[tag] > this.peak[tag]) this.peak[tag] = this.current[tag];
    if (this.total > this.peakTotal) this.peakTotal = this.total;
  }
}
