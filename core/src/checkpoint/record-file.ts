/**
 * One rank's checkpoint file: a sequence of CBOR records, each payload compressed with fflate
 * (raw DEFLATE), each record protected by a CRC-32, followed by an index and a fixed trailer.
 *
 * ```
 * [16 bytes]  magic "ZMCKPT\0\0", u32 LE format version, u32 LE rank
 * [frames]    frame i = CBOR map {name, dtype, start, count, codec, raw_bytes, data}
 * [index]     CBOR map {version, rank, world_size, tag, layout, records: [{name, offset, bytes, crc,
 *             dtype, start, count, codec, raw_bytes}]}  (offset/bytes locate the frame; crc = CRC-32
 *             of the frame bytes; world_size and tag identify the save the file belongs to; layout
 *             = {zero_stage, ep_size, placement_sha256} the saving job's layout, or absent)
 * [24 bytes]  u64 LE index offset, u32 LE index bytes, u32 LE CRC-32 of the index, "ZMCKEND\0"
 * ```
 *
 * A record holds `count` consecutive elements, starting at element `start`, of one state of one
 * parameter unit (`name` = `<unit>/<state>/<start>`; state `params`, `master`, `m` or `v`).
 *
 * Codecs (`data` per codec):
 * - `shuffle` (default): the byte-shuffle filter of HDF5/Blosc — the payload is split into one
 *   plane per byte of the element (plane b holds byte b of every element), and each plane is
 *   DEFLATE-compressed with fflate (level 1) when a 16 KiB sample of it compresses below 90 %, else
 *   stored. `data` = the array of planes, `planes` = one letter per plane, `d` (deflated) or `r`
 *   (stored). Float exponent bytes compress well, mantissa bytes hardly at all: this keeps most of
 *   the size gain at several times the speed of deflating everything (measured in
 *   `bun run bench checkpoint`).
 * - `deflate`: the whole payload, fflate raw DEFLATE. `data` = bytes.
 * - `raw`: stored. `data` = bytes.
 *
 * Files are untrusted input (a truncated or altered file must end in a clean error, never a crash,
 * a hang or a huge allocation): the reader checks the trailer's offsets against the file size
 * before reading the index, checks the index's CRC before decoding it, validates every index entry
 * (types, ranges inside the frame area, ascending and non-overlapping, `raw_bytes = count × dtype
 * size` ≤ {@link MAX_RECORD_RAW_BYTES}) before any record is read, checks a frame's CRC before
 * decoding it, compares the frame's fields with its index entry, and decompresses into a buffer of
 * exactly the announced size (a longer or shorter stream is an error). Work is bounded before it is
 * done: the number of records against the frame area's size, every announced decompressed size
 * against {@link MAX_RECORD_RAW_BYTES} and against {@link MAX_DEFLATE_RATIO} × the compressed
 * bytes that must produce it (checked before any output buffer is allocated), and error messages
 * render decoded values through a bounded describer (no `JSON.stringify` of untrusted values: a
 * decoded CBOR value may hold BigInts or cycles). Every error is a {@link CheckpointError} naming
 * the file and the record.
 *
 * {@link RecordFileReader.indexDigest} (SHA-256 of the index bytes) identifies a file's whole
 * content: the index lists every frame's CRC-32, offset and size, and the tag, rank and world size.
 * The manifest records it per rank file (manifest.ts), so a rank file from another save is refused.
 *
 * CRC-32 is the IEEE polynomial (zlib's `crc32`), computed with Bun's built-in `Bun.hash.crc32`.
 */
import { closeSync, fstatSync, fsyncSync, openSync, readSync, statSync, writeSync } from "node:fs";
import { decode as cborDecode, decodeMultiple as cborDecodeMultiple, encode as cborEncode } from "cbor-x";
import { deflateSync, inflateSync } from "fflate";
import { describeValue } from "../config/json-bounds.ts";
import { cborBoundsProblem } from "./cbor-bounds.ts";
import { CheckpointError, writingFile } from "./errors.ts";
import { quoteUntrusted, QUOTE_MESSAGE_CHARS } from "../config/quote-untrusted.ts";
import { crc32 as zlibCrc32 } from "node:zlib";
import { createHash } from "node:crypto";

/** Format version written in the header and the index (2: the index records tag and world size). */
export const RECORD_FILE_VERSION = 2;
/** Largest decompressed payload of one record (bytes): 16 × the 4 MiB chunks save.ts writes. */
export const MAX_RECORD_RAW_BYTES = 1 << 26;
/** Largest output/input ratio of DEFLATE (RFC 1951: a 258-byte match costs at least 2 bits, so
 * ≈ 1032:1); a record announcing more output than its compressed bytes can produce is refused
 * before anything is allocated or inflated. */
export const MAX_DEFLATE_RATIO = 1032;
/** Smallest possible frame (a CBOR map with the seven required fields is far larger). */
const MIN_FRAME_BYTES = 16;
/** Longest tag accepted in an index. */
const MAX_TAG_CHARS = 256;
/** Largest accepted index (bytes). */
export const MAX_INDEX_BYTES = 1 << 26;

const MAGIC = new TextEncoder().encode("ZMCKPT\0\0");
const END_MAGIC = new TextEncoder().encode("ZMCKEND\0");
const HEADER_BYTES = 16;
const TRAILER_BYTES = 24;

/** Element types a record may hold, with their sizes in bytes. */
export const RECORD_DTYPE_BYTES: Readonly<Record<RecordDType, number>> = { f32: 4, f16: 2, bf16: 2, i32: 4, u32: 4 };
/** Element type of a record. */
export type RecordDType = "f32" | "f16" | "bf16" | "i32" | "u32";
/** Payload encoding (see the module comment). */
export type RecordCodec = "shuffle" | "deflate" | "raw";

/** One record as listed in a file's index. */
export interface RecordEntry {
  name: string;
  /** Byte offset of the frame in the file. */
  offset: number;
  /** Frame length in bytes. */
  bytes: number;
  /** CRC-32 of the frame bytes. */
  crc: number;
  dtype: RecordDType;
  /** First element (unit coordinates). */
  start: number;
  /** Elements held. */
  count: number;
  codec: RecordCodec;
  /** Decompressed payload bytes = count × dtype size. */
  raw_bytes: number;
}

/** CRC-32 (IEEE) of `bytes`. */
export function crc32(bytes: Uint8Array): number {
  return zlibCrc32(bytes) >>> 0;
}

/** Write exactly `data` to `fd` (at the current position). */
function writeAll(fd: number, data: Uint8Array): void {
  let done = 0;
  while (done < data.length) done += writeSync(fd, data, done, data.length - done);
}

/** Options of {@link RecordFileWriter.create}. */
export interface RecordWriterOptions {
  /** Payload codec (default "shuffle"). */
  codec?: RecordCodec;
  /** DEFLATE level 0–9 (default 1: fastest; float data compresses little). */
  level?: 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9;
  /** Checkpoint tag the file belongs to (recorded in the index; default null). */
  tag?: string | null;
  /** World size of the saving job (recorded in the index; default null). */
  worldSize?: number | null;
  /** The saving job's layout (recorded in the index; default null). */
  layout?: RecordLayout | null;
}

/**
 * The layout of the job that wrote a rank file, as its index records it: the manifest's
 * `zero_stage`, `ep_size` and the SHA-256 (hex) of the JSON of its expert placement
 * (`plugins.moe.placement`, null without one). Checked against the manifest on load
 * (manifest.ts verifyRankFile), so an edited and re-signed layout is refused naming the field.
 */
export interface RecordLayout {
  zero_stage: number;
  ep_size: number;
  placement_sha256: string | null;
}

/** Streaming writer of one rank file (see the module comment). Records are appended one at a
 * time; {@link finish} writes the index and trailer, fsyncs and closes. */
export class RecordFileWriter {
  private readonly entries: RecordEntry[] = [];
  private readonly names = new Set<string>();
  private pos = HEADER_BYTES;
  private closed = false;
  /** Uncompressed payload bytes written so far. */
  rawBytes = 0;

  private constructor(
    readonly path: string,
    private readonly fd: number,
    private readonly opts: { codec: RecordCodec; level: NonNullable<RecordWriterOptions["level"]>; tag: string | null; worldSize: number | null; layout: RecordLayout | null },
  ) {}

  /** Create (truncate) `path` and write the header. @throws fs errors. */
  static create(path: string, rank: number, opts: RecordWriterOptions = {}): RecordFileWriter {
    const fd = writingFile(path, "create the rank file", () => openSync(path, "w"));
    const head = new Uint8Array(HEADER_BYTES);
    head.set(MAGIC, 0);
    const dv = new DataView(head.buffer);
    dv.setUint32(8, RECORD_FILE_VERSION, true);
    dv.setUint32(12, rank, true);
    writingFile(path, "write the header", () => writeAll(fd, head));
    return new RecordFileWriter(path, fd, { codec: opts.codec ?? "shuffle", level: opts.level ?? 1, tag: opts.tag ?? null, worldSize: opts.worldSize ?? null, layout: opts.layout ?? null });
  }

  /**
   * Append one record of `count` elements of `dtype` whose raw little-endian bytes are `raw`.
   * @throws CheckpointError for a duplicate name, a size that is not count × dtype size, or a
   *   payload over {@link MAX_RECORD_RAW_BYTES}.
   */
  add(name: string, dtype: RecordDType, start: number, count: number, raw: Uint8Array): void {
    if (this.closed) throw new CheckpointError(this.path, "writer already finished", name);
    if (this.names.has(name)) throw new CheckpointError(this.path, "duplicate record name", name);
    if (raw.byteLength !== count * RECORD_DTYPE_BYTES[dtype]) throw new CheckpointError(this.path, `payload has ${raw.byteLength} bytes, expected ${count} × ${RECORD_DTYPE_BYTES[dtype]}`, name);
    if (raw.byteLength > MAX_RECORD_RAW_BYTES) throw new CheckpointError(this.path, `payload of ${raw.byteLength} bytes is over the ${MAX_RECORD_RAW_BYTES}-byte record limit`, name);
    const codec = this.opts.codec;
    let frame: Uint8Array;
    if (codec === "shuffle") {
      const { planes, letters } = shuffleEncode(raw, RECORD_DTYPE_BYTES[dtype], this.opts.level);
      frame = cborEncode({ name, dtype, start, count, codec, raw_bytes: raw.byteLength, data: planes, planes: letters }) as Uint8Array;
    } else {
      const data = codec === "deflate" ? deflateSync(raw, { level: this.opts.level }) : raw;
      frame = cborEncode({ name, dtype, start, count, codec, raw_bytes: raw.byteLength, data }) as Uint8Array;
    }
    const entry: RecordEntry = { name, offset: this.pos, bytes: frame.byteLength, crc: crc32(frame), dtype, start, count, codec, raw_bytes: raw.byteLength };
    writingFile(this.path, `write record ${quoteUntrusted(name)}`, () => writeAll(this.fd, frame));
    this.pos += frame.byteLength;
    this.rawBytes += raw.byteLength;
    this.entries.push(entry);
    this.names.add(name);
  }

  /** Bytes written so far (header and frames). */
  get bytesWritten(): number {
    return this.pos;
  }

  /** Write the index and trailer, fsync and close. Returns the file size in bytes. */
  finish(rank: number): number {
    if (this.closed) throw new CheckpointError(this.path, "writer already finished");
    const index = cborEncode({ version: RECORD_FILE_VERSION, rank, world_size: this.opts.worldSize, tag: this.opts.tag, ...(this.opts.layout ? { layout: this.opts.layout } : {}), records: this.entries }) as Uint8Array;
    if (index.byteLength > MAX_INDEX_BYTES) throw new CheckpointError(this.path, `index of ${index.byteLength} bytes is over the ${MAX_INDEX_BYTES}-byte limit`);
    const trailer = new Uint8Array(TRAILER_BYTES);
    const dv = new DataView(trailer.buffer);
    dv.setBigUint64(0, BigInt(this.pos), true);
    dv.setUint32(8, index.byteLength, true);
    dv.setUint32(12, crc32(index), true);
    trailer.set(END_MAGIC, 16);
    writingFile(this.path, "write the index", () => {
      writeAll(this.fd, index);
      writeAll(this.fd, trailer);
      fsyncSync(this.fd);
    });
    closeSync(this.fd);
    this.closed = true;
    return this.pos + index.byteLength + TRAILER_BYTES;
  }

  /** Close without finishing (the file is left incomplete; the caller removes it). */
  abort(): void {
    if (this.closed) return;
    this.closed = true;
    closeSync(this.fd);
  }
}

function isUint(x: unknown, max = Number.MAX_SAFE_INTEGER): x is number {
  return typeof x === "number" && Number.isInteger(x) && x >= 0 && x <= max;
}

/** Random-access reader of one rank file (see the module comment for what is validated). */
export class RecordFileReader {
  /** Records in file order. */
  readonly records: readonly RecordEntry[];
  /** Rank that wrote the file. */
  readonly rank: number;
  /** Tag and world size of the save, as the index records them (null when the writer gave none). */
  readonly tag: string | null;
  readonly worldSize: number | null;
  /** The saving job's layout as the index records it (null in files written before it was). */
  readonly layout: RecordLayout | null;
  /** File size in bytes. */
  readonly fileBytes: number;
  /** SHA-256 (hex) of the index bytes: commits to every frame through their CRCs (module comment). */
  readonly indexDigest: string;
  private readonly byName = new Map<string, RecordEntry>();
  private fd: number | null;

  private constructor(readonly path: string, fd: number, rank: number, records: RecordEntry[], meta: { tag: string | null; worldSize: number | null; layout: RecordLayout | null; fileBytes: number; indexDigest: string }) {
    this.fd = fd;
    this.rank = rank;
    this.records = records;
    this.tag = meta.tag;
    this.worldSize = meta.worldSize;
    this.layout = meta.layout;
    this.fileBytes = meta.fileBytes;
    this.indexDigest = meta.indexDigest;
    for (const r of records) this.byName.set(r.name, r);
  }

  /**
   * Open `path`, validate the header, trailer and index.
   * @throws CheckpointError naming the file for a missing file, a short file, bad magic/version,
   *   offsets outside the file, an index CRC mismatch, or an invalid index entry (named).
   */
  static open(path: string): RecordFileReader {
    let fd: number;
    try {
      const st = statSync(path);
      // before open(2): opening a FIFO blocks until a writer comes; reading a directory fails with EISDIR
      if (!st.isFile()) throw new CheckpointError(path, `is not a regular file (${st.isDirectory() ? "a directory" : st.isFIFO() ? "a FIFO" : "a device or socket"}); expected a rank file`);
      fd = openSync(path, "r");
    } catch (e) {
      if (e instanceof CheckpointError) throw e;
      throw new CheckpointError(path, `cannot open: ${(e as Error).message}`);
    }
    try {
      const size = fstatSync(fd).size;
      if (size < HEADER_BYTES + TRAILER_BYTES) throw new CheckpointError(path, `file has ${size} bytes, fewer than header + trailer (${HEADER_BYTES + TRAILER_BYTES}): truncated`);
      const head = readAt(fd, path, 0, HEADER_BYTES);
      for (let i = 0; i < MAGIC.length; i++) if (head[i] !== MAGIC[i]) throw new CheckpointError(path, "not a ZeroMoE checkpoint rank file (bad magic)");
      const hv = new DataView(head.buffer, head.byteOffset, HEADER_BYTES);
      const version = hv.getUint32(8, true);
      if (version !== RECORD_FILE_VERSION) throw new CheckpointError(path, `format version ${version}, this reader supports ${RECORD_FILE_VERSION}`);
      const rank = hv.getUint32(12, true);
      const tr = readAt(fd, path, size - TRAILER_BYTES, TRAILER_BYTES);
      for (let i = 0; i < END_MAGIC.length; i++) if (tr[16 + i] !== END_MAGIC[i]) throw truncated(fd, path, size, "trailer magic missing");
      const tv = new DataView(tr.buffer, tr.byteOffset, TRAILER_BYTES);
      const indexOffset = Number(tv.getBigUint64(0, true));
      const indexBytes = tv.getUint32(8, true);
      const indexCrc = tv.getUint32(12, true);
      if (indexBytes > MAX_INDEX_BYTES) throw new CheckpointError(path, `index of ${indexBytes} bytes is over the ${MAX_INDEX_BYTES}-byte limit`);
      if (indexOffset < HEADER_BYTES || indexOffset + indexBytes + TRAILER_BYTES !== size) {
        throw truncated(fd, path, size, `trailer says index at ${indexOffset} (${indexBytes} bytes) but the file has ${size} bytes`);
      }
      const index = readAt(fd, path, indexOffset, indexBytes);
      if (crc32(index) !== indexCrc) throw new CheckpointError(path, "index checksum mismatch: file altered");
      let parsed: unknown;
      // declared lengths checked against the bytes first: cbor-x trusts them (cbor-bounds.ts)
      const bounds = cborBoundsProblem(index);
      if (bounds !== null) throw new CheckpointError(path, `index is not valid CBOR: ${bounds}`);
      try {
        parsed = cborDecode(index);
      } catch (e) {
        throw new CheckpointError(path, `index is not valid CBOR: ${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)}`);
      }
      const { records, tag, worldSize, layout } = validateIndex(parsed, path, rank, indexOffset);
      const indexDigest = createHash("sha256").update(index).digest("hex");
      return new RecordFileReader(path, fd, rank, records, { tag, worldSize, layout, fileBytes: size, indexDigest });
    } catch (e) {
      closeSync(fd);
      throw e;
    }
  }

  /** The index entry of `name`, or undefined. */
  entry(name: string): RecordEntry | undefined {
    return this.byName.get(name);
  }

  /**
   * Read, verify and decompress one record's payload (raw little-endian bytes, 8-byte aligned).
   * @throws CheckpointError naming the file and record for a CRC mismatch, an undecodable frame,
   *   frame fields that differ from the index, or a payload of the wrong size.
   */
  readPayload(e: RecordEntry): Uint8Array {
    if (this.fd === null) throw new CheckpointError(this.path, "reader is closed", e.name);
    const frame = readAt(this.fd, this.path, e.offset, e.bytes, e.name);
    if (crc32(frame) !== e.crc) throw new CheckpointError(this.path, "checksum mismatch: record altered", e.name);
    let f: Record<string, unknown>;
    const bounds = cborBoundsProblem(frame);
    if (bounds !== null) throw new CheckpointError(this.path, `frame is not valid CBOR: ${bounds}`, e.name);
    try {
      f = cborDecode(frame) as Record<string, unknown>;
    } catch (err) {
      throw new CheckpointError(this.path, `frame is not valid CBOR: ${quoteUntrusted((err as Error).message, QUOTE_MESSAGE_CHARS)}`, e.name);
    }
    if (!f || typeof f !== "object") throw new CheckpointError(this.path, "frame is not a CBOR map", e.name);
    for (const k of ["name", "dtype", "start", "count", "codec", "raw_bytes"] as const) {
      if (f[k] !== e[k]) throw new CheckpointError(this.path, `frame field ${k} = ${describeValue(f[k])} differs from the index (${describeValue(e[k])})`, e.name);
    }
    const data = f.data;
    if (e.codec === "shuffle") return shuffleDecode(f, e, this.path);
    if (!(data instanceof Uint8Array)) throw new CheckpointError(this.path, "frame has no byte-string payload", e.name);
    if (e.codec === "raw") {
      if (data.byteLength !== e.raw_bytes) throw new CheckpointError(this.path, `stored payload has ${data.byteLength} bytes, expected ${e.raw_bytes}`, e.name);
      return data.slice();
    }
    if (e.raw_bytes > MAX_DEFLATE_RATIO * data.byteLength + 64) throw new CheckpointError(this.path, `${data.byteLength} compressed bytes cannot inflate to the announced ${e.raw_bytes} bytes (DEFLATE's ratio is at most ${MAX_DEFLATE_RATIO}:1)`, e.name);
    // decompress into raw_bytes + 1 so that a longer stream is detected (fflate truncates silently)
    const probe = new Uint8Array(e.raw_bytes + 1);
    let got: Uint8Array;
    try {
      got = inflateSync(data, { out: probe });
    } catch (err) {
      throw new CheckpointError(this.path, `payload does not decompress: ${quoteUntrusted((err as Error).message, QUOTE_MESSAGE_CHARS)}`, e.name);
    }
    if (got.byteLength !== e.raw_bytes) throw new CheckpointError(this.path, `payload decompresses to ${got.byteLength === e.raw_bytes + 1 ? "more than " + e.raw_bytes : got.byteLength} bytes, expected ${e.raw_bytes}`, e.name);
    return probe.subarray(0, e.raw_bytes);
  }

  /** Verify every record (CRC, decode, size). @throws like {@link readPayload}. */
  verifyAll(): void {
    for (const r of this.records) this.readPayload(r);
  }

  /** Close the file (idempotent). */
  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

/** Sample size and ratio deciding whether a plane is deflated (see the module comment). */
const SAMPLE_BYTES = 16384;
const KEEP_RATIO = 0.9;

/** Byte-shuffle `raw` into `k` planes and compress each worth compressing. */
function shuffleEncode(raw: Uint8Array, k: number, level: RecordWriterOptions["level"]): { planes: Uint8Array[]; letters: string } {
  const n = raw.byteLength / k;
  const planes: Uint8Array[] = [];
  let letters = "";
  for (let b = 0; b < k; b++) {
    const p = new Uint8Array(n);
    for (let i = 0, j = b; i < n; i++, j += k) p[i] = raw[j]!;
    // a plane no larger than the sample is deflated once; a larger one only when its sample compresses
    const small = n <= SAMPLE_BYTES;
    const sample = p.subarray(0, Math.min(n, SAMPLE_BYTES));
    if (n > 0 && (small || deflateSync(sample, { level }).byteLength < KEEP_RATIO * sample.byteLength)) {
      const c = deflateSync(p, { level });
      if (c.byteLength < KEEP_RATIO * p.byteLength) {
        planes.push(c);
        letters += "d";
        continue;
      }
    }
    planes.push(p);
    letters += "r";
  }
  return { planes, letters };
}

/** Decode a `shuffle` frame (fields already checked against the index entry). */
function shuffleDecode(f: Record<string, unknown>, e: RecordEntry, path: string): Uint8Array {
  const k = RECORD_DTYPE_BYTES[e.dtype];
  const n = e.count;
  const planes = f.data;
  const letters = f.planes;
  if (!Array.isArray(planes) || planes.length !== k || typeof letters !== "string" || letters.length !== k || !/^[dr]*$/.test(letters)) {
    throw new CheckpointError(path, `shuffle frame needs ${k} planes and a matching "planes" code string`, e.name);
  }
  // every plane's size is bounded by its bytes before anything is allocated
  for (let b = 0; b < k; b++) {
    const p = planes[b] as unknown;
    if (!(p instanceof Uint8Array)) throw new CheckpointError(path, `shuffle plane ${b} is not a byte string`, e.name);
    if (letters[b] === "d" && n > MAX_DEFLATE_RATIO * p.byteLength + 64) throw new CheckpointError(path, `plane ${b}: ${p.byteLength} compressed bytes cannot inflate to the announced ${n} bytes (DEFLATE's ratio is at most ${MAX_DEFLATE_RATIO}:1)`, e.name);
  }
  const out = new Uint8Array(e.raw_bytes);
  const probe = new Uint8Array(n + 1);
  for (let b = 0; b < k; b++) {
    const p = planes[b] as unknown;
    if (!(p instanceof Uint8Array)) throw new CheckpointError(path, `shuffle plane ${b} is not a byte string`, e.name);
    let plane: Uint8Array;
    if (letters[b] === "r") {
      if (p.byteLength !== n) throw new CheckpointError(path, `stored plane ${b} has ${p.byteLength} bytes, expected ${n}`, e.name);
      plane = p;
    } else {
      let got: Uint8Array;
      try {
        got = inflateSync(p, { out: probe });
      } catch (err) {
        throw new CheckpointError(path, `plane ${b} does not decompress: ${quoteUntrusted((err as Error).message, QUOTE_MESSAGE_CHARS)}`, e.name);
      }
      if (got.byteLength !== n) throw new CheckpointError(path, `plane ${b} decompresses to ${got.byteLength === n + 1 ? "more than " + n : got.byteLength} bytes, expected ${n}`, e.name);
      plane = probe;
    }
    for (let i = 0, j = b; i < n; i++, j += k) out[j] = plane[i]!;
  }
  return out;
}

/** Largest file the truncation diagnosis scans (bytes). */
const MAX_SCAN_BYTES = 64 << 20;

/**
 * The error for a file whose trailer is missing or inconsistent: scans the frames from the header
 * on (files up to {@link MAX_SCAN_BYTES}) to name the last intact record, so the message says
 * where the file was cut (the record after it, or the index, is incomplete).
 */
function truncated(fd: number, path: string, size: number, what: string): CheckpointError {
  let detail = "";
  if (size <= MAX_SCAN_BYTES && size > HEADER_BYTES) {
    const names: string[] = [];
    let sawIndex = false;
    try {
      cborDecodeMultiple(readAt(fd, path, HEADER_BYTES, size - HEADER_BYTES), (v: unknown) => {
        const o = v as Record<string, unknown> | null;
        if (o && typeof o === "object" && typeof o.name === "string") names.push(o.name);
        else if (o && typeof o === "object" && "records" in o) sawIndex = true;
      });
    } catch {
      // the scan stops at the first incomplete or undecodable item
    }
    const last = names[names.length - 1];
    detail = sawIndex
      ? ` (all ${names.length} records and the index are complete; the trailer is damaged)`
      : last === undefined
        ? " (no complete record after the header: the first record is cut)"
        : ` (${names.length} complete record(s); the data after record "${last}" is cut or damaged)`;
    return new CheckpointError(path, `${what}: file truncated or altered${detail}`, sawIndex || last === undefined ? undefined : last);
  }
  return new CheckpointError(path, `${what}: file truncated or altered`);
}

/** Read exactly `len` bytes at `pos` (8-byte aligned result). */
function readAt(fd: number, path: string, pos: number, len: number, record?: string): Uint8Array {
  const buf = new Uint8Array(len);
  let done = 0;
  while (done < len) {
    const n = readSync(fd, buf, done, len - done, pos + done);
    if (n <= 0) throw new CheckpointError(path, `unexpected end of file reading ${len} bytes at ${pos}: truncated`, record);
    done += n;
  }
  return buf;
}

function validateIndex(parsed: unknown, path: string, rank: number, frameEnd: number): { records: RecordEntry[]; tag: string | null; worldSize: number | null; layout: RecordLayout | null } {
  const idx = parsed as { version?: unknown; rank?: unknown; records?: unknown; tag?: unknown; world_size?: unknown; layout?: unknown };
  if (!idx || typeof idx !== "object") throw new CheckpointError(path, "index is not a CBOR map");
  if (idx.version !== RECORD_FILE_VERSION) throw new CheckpointError(path, `index version ${describeValue(idx.version)}, expected ${RECORD_FILE_VERSION}`);
  if (idx.rank !== rank) throw new CheckpointError(path, `index rank ${describeValue(idx.rank)} differs from the header's rank ${rank}`);
  if (idx.tag != null && (typeof idx.tag !== "string" || idx.tag.length > MAX_TAG_CHARS)) throw new CheckpointError(path, `index tag ${describeValue(idx.tag)} is not a tag name`);
  if (idx.world_size != null && !(isUint(idx.world_size, 1 << 20) && idx.world_size > rank)) throw new CheckpointError(path, `index world_size ${describeValue(idx.world_size)} is not an integer above rank ${rank}`);
  let layout: RecordLayout | null = null;
  if (idx.layout != null) {
    const l = idx.layout as Record<string, unknown>;
    if (typeof l !== "object" || !isUint(l.zero_stage, 3) || !isUint(l.ep_size, 1 << 20) || (l.placement_sha256 !== null && !(typeof l.placement_sha256 === "string" && /^[0-9a-f]{64}$/.test(l.placement_sha256))))
      throw new CheckpointError(path, `index layout ${describeValue(idx.layout)} is not {zero_stage, ep_size, placement_sha256}`);
    layout = { zero_stage: l.zero_stage as number, ep_size: l.ep_size as number, placement_sha256: l.placement_sha256 as string | null };
  }
  if (!Array.isArray(idx.records)) throw new CheckpointError(path, "index has no records list");
  if (idx.records.length > (frameEnd - HEADER_BYTES) / MIN_FRAME_BYTES) throw new CheckpointError(path, `index lists ${idx.records.length} records, more than the ${frameEnd - HEADER_BYTES}-byte frame area can hold`);
  const out: RecordEntry[] = [];
  const names = new Set<string>();
  let prevEnd = HEADER_BYTES;
  for (let i = 0; i < idx.records.length; i++) {
    const r = idx.records[i] as Record<string, unknown>;
    const label = r && typeof r === "object" && typeof r.name === "string" ? r.name : `#${i}`;
    const bad = (m: string) => new CheckpointError(path, `index entry ${m}`, label);
    if (!r || typeof r !== "object" || typeof r.name !== "string" || r.name.length === 0 || r.name.length > 1024) throw bad("has no valid name");
    if (names.has(r.name)) throw bad("is duplicated");
    if (typeof r.dtype !== "string" || !Object.hasOwn(RECORD_DTYPE_BYTES, r.dtype)) throw bad(`has unknown dtype ${describeValue(r.dtype)}`);
    if (r.codec !== "shuffle" && r.codec !== "deflate" && r.codec !== "raw") throw bad(`has unknown codec ${describeValue(r.codec)}`);
    if (!isUint(r.offset) || !isUint(r.bytes) || !isUint(r.crc, 0xffffffff) || !isUint(r.start) || !isUint(r.count) || !isUint(r.raw_bytes, MAX_RECORD_RAW_BYTES)) throw bad("has a field that is not a non-negative integer in range");
    const dt = r.dtype as RecordDType;
    if (r.raw_bytes !== r.count * RECORD_DTYPE_BYTES[dt]) throw bad(`raw_bytes ${r.raw_bytes} ≠ count ${r.count} × ${RECORD_DTYPE_BYTES[dt]}`);
    if (r.codec !== "raw" && r.raw_bytes > MAX_DEFLATE_RATIO * r.bytes + 64) throw bad(`announces ${r.raw_bytes} decompressed bytes from a ${r.bytes}-byte frame (DEFLATE's ratio is at most ${MAX_DEFLATE_RATIO}:1)`);
    if (r.codec === "raw" && r.raw_bytes > r.bytes) throw bad(`announces ${r.raw_bytes} stored bytes in a ${r.bytes}-byte frame`);
    if (r.offset < prevEnd || r.offset + r.bytes > frameEnd) throw bad(`frame [${r.offset}, ${r.offset + r.bytes}) overlaps another or lies outside the frame area [${HEADER_BYTES}, ${frameEnd})`);
    prevEnd = r.offset + r.bytes;
    names.add(r.name);
    out.push({ name: r.name, offset: r.offset, bytes: r.bytes, crc: r.crc, dtype: dt, start: r.start, count: r.count, codec: r.codec, raw_bytes: r.raw_bytes });
  }
  return { records: out, tag: (idx.tag as string | null | undefined) ?? null, worldSize: (idx.world_size as number | null | undefined) ?? null, layout };
}
