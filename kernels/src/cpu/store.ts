/**
 * Buffers and per-tag memory accounting of the cpu backend.
 *
 * A {@link CpuBuf} owns a typed array sized exactly to its element count. Accounting counts
 * `length × DTYPE_BYTES[dtype]` bytes (f16/bf16: 2 bytes per element, though stored in a
 * Uint16Array; f32 counts 4 even when stored as Float64Array in f64 precision mode), so the
 * figures match what the webgpu backend reports for the same program.
 */

import { DTYPE_BYTES, MEM_TAGS, type Buf, type DType, type HostArray, type MemTag, type MemoryStats, type View } from "../backend.ts";

/** Float storage of f32 buffers: Float32Array in "f32" precision, Float64Array in "f64". */
export type FArr = Float32Array | Float64Array;

/** Arithmetic precision of a cpu backend. */
export type CpuPrecision = "f32" | "f64";

/** A cpu buffer: the {@link Buf} fields plus its storage. `data` is null once freed. */
export class CpuBuf implements Buf {
  /** Storage; null after {@link MemoryLedger.free}. */
  data: HostArray | null;
  constructor(
    readonly dtype: DType,
    readonly length: number,
    public tag: MemTag,
    readonly id: number,
    data: HostArray,
    /** The ledger that allocated it (ownership check). */
    readonly owner: MemoryLedger,
  ) {
    this.data = data;
  }
}

function zeroTags(): Record<MemTag, number> {
  const r = {} as Record<MemTag, number>;
  for (const t of MEM_TAGS) r[t] = 0;
  return r;
}

/** Allocates {@link CpuBuf}s and keeps current/peak bytes per tag and the peak of the total. */
export class MemoryLedger {
  private readonly current = zeroTags();
  private readonly peak = zeroTags();
  private total = 0;
  private peakTotal = 0;
  private nextId = 1;

  constructor(readonly precision: CpuPrecision) {}

  /** New zeroed buffer. Throws on a negative/non-integer length or an unknown dtype/tag. */
  alloc(dtype: DType, length: number, tag: MemTag): CpuBuf {
    if (!Number.isInteger(length) || length < 0) throw new Error(`cpu alloc: length must be a non-negative integer, got ${length} (dtype ${dtype}, tag ${tag})`);
    if (!(dtype in DTYPE_BYTES)) throw new Error(`cpu alloc: unknown dtype "${dtype}" (expected f32|f16|bf16|i32|u32)`);
    if (!MEM_TAGS.includes(tag)) throw new Error(`cpu alloc: unknown tag "${tag}" (expected ${MEM_TAGS.join("|")})`);
    let data: HostArray;
    try {
      data = makeArray(dtype, length, this.precision);
    } catch (e) {
      throw new Error(`cpu alloc: could not allocate ${length * DTYPE_BYTES[dtype]} bytes (${length} × ${dtype}) for tag ${tag}: ${(e as Error).message}`);
    }
    const buf = new CpuBuf(dtype, length, tag, this.nextId++, data, this);
    this.add(tag, bytesOf(buf));
    return buf;
  }

  /** Release; throws if already freed or not from this ledger. */
  free(buf: Buf): void {
    const b = this.own(buf, "free");
    this.add(b.tag, -bytesOf(b));
    b.data = null;
  }

  /** Move a live buffer's bytes to another tag. */
  retag(buf: Buf, tag: MemTag): void {
    const b = this.own(buf, "retag");
    if (!MEM_TAGS.includes(tag)) throw new Error(`cpu retag: unknown tag "${tag}" (expected ${MEM_TAGS.join("|")})`);
    const bytes = bytesOf(b);
    this.add(b.tag, -bytes);
    b.tag = tag;
    this.add(tag, bytes);
  }

  /** Snapshot of current and peak bytes. */
  stats(): MemoryStats {
    return { current: { ...this.current }, peak: { ...this.peak }, peakTotal: this.peakTotal };
  }

  /** Peaks := current values. */
  resetPeak(): void {
    for (const t of MEM_TAGS) this.peak[t] = this.current[t];
    this.peakTotal = this.total;
  }

  /** Check `buf` is a live buffer of this ledger and return it typed. `what` names the caller. */
  own(buf: Buf, what: string): CpuBuf {
    if (!(buf instanceof CpuBuf) || buf.owner !== this) throw new Error(`cpu ${what}: buffer #${(buf as Buf | undefined)?.id} does not belong to this cpu backend`);
    if (buf.data === null) throw new Error(`cpu ${what}: buffer #${buf.id} (${buf.dtype}, tag ${buf.tag}) was freed`);
    return buf;
  }

  private add(tag: MemTag, bytes: number): void {
    this.current[tag] += bytes;
    this.total += bytes;
    if (this.current[tag] > this.peak[tag]) this.peak[tag] = this.current[tag];
    if (this.total > this.peakTotal) this.peakTotal = this.total;
  }
}

/** Accounted bytes of a buffer: length × DTYPE_BYTES[dtype]. */
export function bytesOf(b: Buf): number {
  return b.length * DTYPE_BYTES[b.dtype];
}

/** Zeroed typed array for `length` elements of `dtype` in the given precision. */
export function makeArray(dtype: DType, length: number, precision: CpuPrecision): HostArray {
  switch (dtype) {
    case "f32":
      return precision === "f64" ? new Float64Array(length) : new Float32Array(length);
    case "f16":
    case "bf16":
      return new Uint16Array(length);
    case "i32":
      return new Int32Array(length);
    case "u32":
      return new Uint32Array(length);
  }
}

/** A resolved view: the storage array and the element offset. */
export interface Span<A extends HostArray = HostArray> {
  a: A;
  o: number;
}

/** Resolve `v` for an op: live, owned, one of `dtypes`, and `n` elements in bounds from `v.off`.
 * `op` and `arg` name the op and argument in error messages. */
export function span(ledger: MemoryLedger, v: View, n: number, dtypes: readonly DType[], op: string, arg: string): Span {
  if (v === null || v === undefined || v.buf === undefined) throw new Error(`cpu ${op}: argument ${arg} is not a View {buf, off}`);
  const b = ledger.own(v.buf, `${op} (${arg})`);
  if (!dtypes.includes(b.dtype)) throw new Error(`cpu ${op}: ${arg} has dtype ${b.dtype}, expected ${dtypes.join(" or ")}`);
  const off = v.off;
  if (!Number.isInteger(off) || off < 0) throw new Error(`cpu ${op}: ${arg}.off must be a non-negative integer, got ${off}`);
  if (!Number.isInteger(n) || n < 0) throw new Error(`cpu ${op}: element count for ${arg} must be a non-negative integer, got ${n}`);
  if (off + n > b.length) throw new Error(`cpu ${op}: ${arg} needs elements [${off}, ${off + n}) but buffer #${b.id} has ${b.length}`);
  return { a: b.data!, o: off };
}

/** {@link span} for an f32 buffer, typed as float storage. */
export function fspan(ledger: MemoryLedger, v: View, n: number, op: string, arg: string): Span<FArr> {
  return span(ledger, v, n, ["f32"], op, arg) as Span<FArr>;
}

/** {@link span} for an i32 buffer. */
export function ispan(ledger: MemoryLedger, v: View, n: number, op: string, arg: string): Span<Int32Array> {
  return span(ledger, v, n, ["i32"], op, arg) as Span<Int32Array>;
}
