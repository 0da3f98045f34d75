/**
 * Device buffers of the webgpu backend and their per-tag accounting.
 *
 * Every {@link Buf} is one GPUBuffer (STORAGE | COPY_SRC | COPY_DST), sized `length × bytes`
 * rounded up to a multiple of 4 (16-bit dtypes hold two elements per 32-bit word) and at least 4
 * bytes. Accounting counts `length × DTYPE_BYTES[dtype]` (without the padding), the same figure the
 * cpu backend reports for the same program.
 */
import { DTYPE_BYTES, MEM_TAGS, type Buf, type DType, type MemTag, type MemoryStats, type View } from "../backend.ts";
import { BufferUsage } from "./constants.ts";

/** A webgpu buffer: {@link Buf} fields plus the GPUBuffer (null once freed). */
export class GpuBuf implements Buf {
  gpu: GPUBuffer | null;
  constructor(
    readonly dtype: DType,
    readonly length: number,
    public tag: MemTag,
    readonly id: number,
    gpu: GPUBuffer,
    /** Allocated size in bytes (multiple of 4). */
    readonly byteSize: number,
    readonly owner: BufferLedger,
  ) {
    this.gpu = gpu;
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
  /** Host milliseconds spent in `createBuffer` for those. */
  createMs = 0;
  /** Bytes of the GPUBuffers of live (allocated, not freed) buffers — padded sizes, pooled ones
   * excluded — and their high-water mark since creation (never reset; bounds the adaptive pool). */
  liveBytes = 0;
  maxLiveBytes = 0;

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
  ) {}

  /** New zeroed buffer: a recycled one (zeroed by a clear ahead of its first use) or a fresh one
   * (WebGPU zero-initialises). Its GPUBuffer must only be written through paths that order the
   * write after that clear (backend `write`, commands.ts `beforeWrite`). With `zero` false a
   * recycled buffer keeps its previous contents (no clear: the caller overwrites it). Throws on bad
   * length/dtype/tag or a size above the device limit, naming bytes and tag. */
  alloc(dtype: DType, length: number, tag: MemTag, zero = true): GpuBuf {
    if (!Number.isInteger(length) || length < 0) throw new Error(`webgpu alloc: length must be a non-negative integer, got ${length} (dtype ${dtype}, tag ${tag})`);
    if (!(dtype in DTYPE_BYTES)) throw new Error(`webgpu alloc: unknown dtype "${dtype}" (expected f32|f16|bf16|i32|u32)`);
    if (!MEM_TAGS.includes(tag)) throw new Error(`webgpu alloc: unknown tag "${tag}" (expected ${MEM_TAGS.join("|")})`);
    const bytes = paddedBytes(dtype, length);
    if (bytes > this.maxBytes) throw new Error(`webgpu alloc: ${bytes} bytes (${length} × ${dtype}) for tag ${tag} exceed the device's largest bindable buffer of ${this.maxBytes} bytes`);
    const pooled = this.reuse(bytes, zero);
    this.liveBytes += bytes;
    if (this.liveBytes > this.maxLiveBytes) this.maxLiveBytes = this.liveBytes;
    if (pooled) {
      const b = new GpuBuf(dtype, length, tag, this.nextId++, pooled, bytes, this);
      this.add(tag, length * DTYPE_BYTES[dtype]);
      return b;
    }
    let gpu: GPUBuffer;
    const t0 = performance.now();
    this.device.pushErrorScope("out-of-memory");
    try {
      gpu = this.device.createBuffer({ size: bytes, usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC | BufferUsage.COPY_DST });
    } catch (e) {
      void this.device.popErrorScope();
      this.liveBytes -= bytes;
      throw new Error(`webgpu alloc: device refused ${bytes} bytes (${length} × ${dtype}) for tag ${tag}: ${(e as Error).message}`);
    }
    this.onDeferredError(this.device.popErrorScope().then((err) => (err ? `webgpu alloc: device refused ${bytes} bytes (${length} × ${dtype}) for tag ${tag}: ${err.message}` : null)));
    this.creates++;
    this.createMs += performance.now() - t0;
    const b = new GpuBuf(dtype, length, tag, this.nextId++, gpu, bytes, this);
    this.add(tag, length * DTYPE_BYTES[dtype]);
    return b;
  }

  /** Release the buffer from the accounts and return its GPUBuffer, which the caller recycles or
   * destroys once the batch using it is submitted (commands.ts `recycle`). */
  freeDeferred(buf: Buf): GPUBuffer {
    const b = this.own(buf, "free");
    this.add(b.tag, -b.length * DTYPE_BYTES[b.dtype]);
    this.liveBytes -= b.byteSize;
    const g = b.gpu!;
    b.gpu = null;
    return g;
  }

  /** Move a live buffer's bytes to another tag. */
  retag(buf: Buf, tag: MemTag): void {
    const b = this.own(buf, "retag");
    if (!MEM_TAGS.includes(tag)) throw new Error(`webgpu retag: unknown tag "${tag}" (expected ${MEM_TAGS.join("|")})`);
    const bytes = b.length * DTYPE_BYTES[b.dtype];
    this.add(b.tag, -bytes);
    b.tag = tag;
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
    if (buf.gpu === null) throw new Error(`webgpu ${what}: buffer ${buf.id} (${buf.dtype}[${buf.length}], tag ${buf.tag}) was freed`);
    return buf;
  }

  /** Check that `view` is live and holds `n` elements from its offset, optionally of given dtypes.
   * Returns the GpuBuf. Throws naming the op and argument. */
  view(v: View, n: number, op: string, arg: string, dtypes?: readonly DType[]): GpuBuf {
    if (!v || typeof v !== "object" || !v.buf) throw new Error(`webgpu ${op}: argument ${arg} is not a View {buf, off}`);
    const b = this.own(v.buf, `${op} (${arg})`);
    if (dtypes && !dtypes.includes(b.dtype)) throw new Error(`webgpu ${op}: ${arg} must be ${dtypes.join("|")}, got ${b.dtype}`);
    if (!Number.isInteger(v.off) || v.off < 0) throw new Error(`webgpu ${op}: ${arg}.off must be a non-negative integer, got ${v.off}`);
    if (!Number.isInteger(n) || n < 0) throw new Error(`webgpu ${op}: element count for ${arg} must be a non-negative integer, got ${n}`);
    if (v.off + n > b.length) throw new Error(`webgpu ${op}: ${arg} needs ${n} elements from offset ${v.off} but buffer ${b.id} holds ${b.length}`);
    return b;
  }

  private add(tag: MemTag, bytes: number): void {
    this.current[tag] += bytes;
    this.total += bytes;
    if (this.current[tag] > this.peak[tag]) this.peak[tag] = this.current[tag];
    if (this.total > this.peakTotal) this.peakTotal = this.total;
  }
}
