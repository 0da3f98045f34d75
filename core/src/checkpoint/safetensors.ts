/**
 * Reader and writer of the safetensors format.
 *
 * Format (https://github.com/huggingface/safetensors, README "Format"):
 *
 * ```
 * [8 bytes: N, u64 little-endian][N bytes: UTF-8 JSON header][data section: raw little-endian bytes]
 * header = { "__metadata__"?: {string: string},
 *            <tensor name>: { "dtype": "F32" | ..., "shape": [int...], "data_offsets": [begin, end] } }
 * ```
 *
 * `data_offsets` are byte offsets relative to the start of the data section. As in the reference
 * Rust implementation (`safetensors::tensor::Metadata::validate`), tensors sorted by offset must
 * tile the data section exactly: the first begins at 0, each begins where the previous ended, each
 * spans `numel × dtype size` bytes, and the last ends at the end of the file. The header is at most
 * {@link SAFETENSORS_MAX_HEADER_BYTES} bytes (the reference's `MAX_HEADER_SIZE`).
 *
 * Files are untrusted input: {@link parseSafetensorsHeader} checks the header length, UTF-8 and JSON
 * validity, every dtype, shape and offset before any tensor data is read or any buffer sized from
 * the header is allocated. Every error is a {@link SafetensorsError} that names the file and, where
 * there is one, the tensor.
 *
 * Streaming: {@link SafetensorsReader} reads the header once, then one tensor at a time on demand;
 * {@link SafetensorsWriter} takes the list of tensors up front (so the header can be written first),
 * then their bytes one tensor (or one part of a tensor) at a time into a temporary file, which
 * {@link SafetensorsWriter.finish} flushes and renames into place.
 *
 * Byte order: data is little-endian on disk; this module refuses to load on a big-endian host.
 */

import { closeSync, fstatSync, fsyncSync, openSync, readSync, renameSync, statSync, unlinkSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { describeValue, scanJsonBounds, type JsonLimits } from "../config/json-bounds.ts";
import { pathForMessage, quoteUntrusted, QUOTE_MESSAGE_CHARS } from "../config/quote-untrusted.ts";
import { findDuplicateJsonKey } from "../config/json-duplicate-keys.ts";
import { writingFile } from "./errors.ts";

if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) {
  throw new Error("core/src/checkpoint/safetensors.ts: host is big-endian; safetensors data is little-endian and no byte swapping is implemented");
}

/** Element types of the safetensors format (names as written in the header). */
export type SafetensorsDType =
  | "BOOL"
  | "U8"
  | "I8"
  | "F8_E5M2"
  | "F8_E4M3"
  | "F8_E8M0"
  | "I16"
  | "U16"
  | "F16"
  | "BF16"
  | "I32"
  | "U32"
  | "F32"
  | "C64"
  | "F64"
  | "I64"
  | "U64";

/** Bytes per element of each safetensors dtype (C64 is a pair of f32). */
export const SAFETENSORS_DTYPE_BYTES: Readonly<Record<SafetensorsDType, number>> = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E5M2: 1,
  F8_E4M3: 1,
  F8_E8M0: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  C64: 8,
  F64: 8,
  I64: 8,
  U64: 8,
};

/** Largest accepted JSON header, in bytes (100 MB, as the reference implementation). */
export const SAFETENSORS_MAX_HEADER_BYTES = 100_000_000;
/** Most dimensions of a tensor's shape. */
export const SAFETENSORS_MAX_RANK = 64;
/** Bounds on the header JSON, checked before it is parsed (config/json-bounds.ts): the format
 * nests three levels (header → entry → shape/data_offsets). */
export const SAFETENSORS_JSON_LIMITS: Readonly<JsonLimits> = { maxDepth: 3, maxString: 16 << 20, maxKey: 4096, maxMembers: 1 << 24, maxText: SAFETENSORS_MAX_HEADER_BYTES };

/** Thrown for every malformed file or misuse; the message names the file and the tensor. */
export class SafetensorsError extends Error {
  /** @param file path (or label) of the file concerned. @param tensor tensor name, when one is concerned. */
  constructor(
    readonly file: string,
    message: string,
    readonly tensor?: string,
  ) {
    super(`safetensors ${pathForMessage(file)}${tensor === undefined ? "" : ` tensor ${quoteUntrusted(tensor)}`}: ${message}`);
    this.name = "SafetensorsError";
  }
}

/** One tensor's entry in a parsed header. Offsets are bytes relative to the data section. */
export interface SafetensorsTensorInfo {
  readonly name: string;
  readonly dtype: SafetensorsDType;
  /** Row-major shape; `[]` is a scalar (one element). */
  readonly shape: readonly number[];
  /** Number of elements (product of `shape`). */
  readonly numel: number;
  /** First byte, relative to the data section. */
  readonly begin: number;
  /** One past the last byte, relative to the data section. */
  readonly end: number;
}

/** A validated header. */
export interface SafetensorsHeader {
  /** Byte length N of the JSON header (as stored in the first 8 bytes). */
  readonly headerBytes: number;
  /** Absolute byte offset of the data section in the file: `8 + headerBytes`. */
  readonly dataStart: number;
  /** Byte length of the data section. */
  readonly dataBytes: number;
  /** Tensors in file (offset) order. */
  readonly tensors: readonly SafetensorsTensorInfo[];
  /** Tensors by name. */
  readonly byName: ReadonlyMap<string, SafetensorsTensorInfo>;
  /** The `__metadata__` string map, or null when absent. */
  readonly metadata: Readonly<Record<string, string>> | null;
}

/** What the writer needs to know about a tensor before its bytes arrive. */
export interface SafetensorsTensorSpec {
  name: string;
  dtype: SafetensorsDType;
  shape: readonly number[];
}

const DTYPES = new Set<string>(Object.keys(SAFETENSORS_DTYPE_BYTES));

/** True when `s` is a safetensors dtype name. */
export function isSafetensorsDType(s: unknown): s is SafetensorsDType {
  return typeof s === "string" && DTYPES.has(s);
}

/** Product of a validated shape, refusing products above 2^53 − 1. Returns -1 on overflow. */
function shapeNumel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) {
    n *= d;
    if (n > Number.MAX_SAFE_INTEGER) return -1;
  }
  return n;
}

/**
 * Decode the 8-byte little-endian header length and check it against the file size.
 *
 * @param first8 the first 8 bytes of the file (fewer means the file is too short).
 * @param fileBytes total file size in bytes.
 * @param file file name for error messages.
 * @returns N, the JSON header's byte length, with `8 + N ≤ fileBytes` and `N ≤ SAFETENSORS_MAX_HEADER_BYTES`.
 * @throws SafetensorsError when the file is shorter than 8 bytes, N exceeds the limit, or N runs past the end.
 */
export function decodeSafetensorsHeaderLength(first8: Uint8Array, fileBytes: number, file: string): number {
  if (first8.length < 8 || fileBytes < 8) {
    throw new SafetensorsError(file, `file is ${fileBytes} bytes; expected at least 8 (the u64 header length)`);
  }
  const dv = new DataView(first8.buffer, first8.byteOffset, 8);
  const lo = dv.getUint32(0, true);
  const hi = dv.getUint32(4, true);
  const n = hi * 2 ** 32 + lo;
  if (hi !== 0 || n > SAFETENSORS_MAX_HEADER_BYTES) {
    throw new SafetensorsError(file, `header length ${hi !== 0 ? `≥ 2^32 (high word ${hi})` : n} exceeds the ${SAFETENSORS_MAX_HEADER_BYTES}-byte limit`);
  }
  if (8 + n > fileBytes) {
    throw new SafetensorsError(file, `header length ${n} runs past the end of the ${fileBytes}-byte file`);
  }
  return n;
}

/**
 * Parse and validate a JSON header.
 *
 * @param json the N header bytes (UTF-8 JSON object, possibly padded with trailing spaces).
 * @param dataBytes byte length of the data section (file size − 8 − N).
 * @param file file name for error messages.
 * @returns the validated header; tensors sorted by offset.
 * @throws SafetensorsError for invalid UTF-8 or JSON, a non-object header, a non-string-map
 *   `__metadata__`, a key given twice in one object, an unknown dtype, a shape entry that is not a non-negative safe integer, offsets
 *   that are not `[begin ≤ end]` integers, a byte span that differs from `numel × dtype size`, or
 *   tensors that overlap, leave gaps, or do not end exactly at the end of the data section.
 */
export function parseSafetensorsHeader(json: Uint8Array, dataBytes: number, file: string): SafetensorsHeader {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(json);
  } catch {
    throw new SafetensorsError(file, "header is not valid UTF-8");
  }
  if (!text.startsWith("{")) throw new SafetensorsError(file, `header must start with '{', found ${describeValue(text.slice(0, 8))}`);
  const over = scanJsonBounds(text, SAFETENSORS_JSON_LIMITS);
  if (over !== null) throw new SafetensorsError(file, `header ${over.path === "" ? "" : `at ${over.path} `}is out of bounds: ${over.message}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new SafetensorsError(file, `header is not valid JSON (${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)})`);
  }
  const dup = findDuplicateJsonKey(text);
  if (dup !== null) throw new SafetensorsError(file, `header holds duplicate key ${describeValue(dup.key)}${dup.path === "" ? "" : ` in ${dup.path}`} (the format forbids duplicate keys; readers disagree on which one wins)`);
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new SafetensorsError(file, "header must be a JSON object");
  }
  let metadata: Record<string, string> | null = null;
  const tensors: SafetensorsTensorInfo[] = [];
  for (const [name, raw] of Object.entries(parsed as Record<string, unknown>)) {
    if (name === "__metadata__") {
      if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
        throw new SafetensorsError(file, "__metadata__ must be an object of string values");
      }
      const m: Record<string, string> = Object.create(null);
      for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
        if (typeof v !== "string") throw new SafetensorsError(file, `__metadata__[${quoteUntrusted(k)}] must be a string, got ${typeof v}`);
        m[k] = v;
      }
      metadata = m;
      continue;
    }
    tensors.push(parseTensorEntry(name, raw, dataBytes, file));
  }
  tensors.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let expect = 0;
  for (const t of tensors) {
    if (t.begin !== expect) {
      throw new SafetensorsError(
        file,
        t.begin < expect ? `data_offsets [${t.begin}, ${t.end}] overlap the previous tensor, which ends at ${expect}` : `data_offsets [${t.begin}, ${t.end}] leave a gap after byte ${expect}`,
        t.name,
      );
    }
    expect = t.end;
  }
  if (expect !== dataBytes) {
    throw new SafetensorsError(file, `tensors end at data byte ${expect} but the data section is ${dataBytes} bytes`);
  }
  const byName = new Map<string, SafetensorsTensorInfo>();
  for (const t of tensors) byName.set(t.name, t);
  return { headerBytes: json.length, dataStart: 8 + json.length, dataBytes, tensors, byName, metadata };
}

function parseTensorEntry(name: string, raw: unknown, dataBytes: number, file: string): SafetensorsTensorInfo {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new SafetensorsError(file, "entry must be an object {dtype, shape, data_offsets}", name);
  }
  const r = raw as Record<string, unknown>;
  const dtype = r.dtype;
  if (!isSafetensorsDType(dtype)) {
    throw new SafetensorsError(file, `unknown dtype ${describeValue(dtype)}; expected one of ${[...DTYPES].join(", ")}`, name);
  }
  const shape = r.shape;
  if (!Array.isArray(shape)) throw new SafetensorsError(file, "shape must be an array of non-negative integers", name);
  if (shape.length > SAFETENSORS_MAX_RANK) throw new SafetensorsError(file, `shape has ${shape.length} dimensions, more than ${SAFETENSORS_MAX_RANK}`, name);
  for (const d of shape) {
    if (typeof d !== "number" || !Number.isSafeInteger(d) || d < 0) {
      throw new SafetensorsError(file, `shape ${describeValue(shape)} must hold non-negative integers`, name);
    }
  }
  const offs = r.data_offsets;
  if (!Array.isArray(offs) || offs.length !== 2) throw new SafetensorsError(file, "data_offsets must be [begin, end]", name);
  const [begin, end] = offs as unknown[];
  if (typeof begin !== "number" || typeof end !== "number" || !Number.isSafeInteger(begin) || !Number.isSafeInteger(end) || begin < 0 || end < begin) {
    throw new SafetensorsError(file, `data_offsets ${describeValue(offs)} must be integers with 0 ≤ begin ≤ end`, name);
  }
  if (end > dataBytes) {
    throw new SafetensorsError(file, `data_offsets [${begin}, ${end}] run past the ${dataBytes}-byte data section`, name);
  }
  const numel = shapeNumel(shape as number[]);
  const elemBytes = SAFETENSORS_DTYPE_BYTES[dtype];
  if (numel < 0 || numel * elemBytes > dataBytes) {
    throw new SafetensorsError(file, `shape ${describeValue(shape)} of ${dtype} needs more bytes than the ${dataBytes}-byte data section holds`, name);
  }
  if (end - begin !== numel * elemBytes) {
    throw new SafetensorsError(file, `data_offsets [${begin}, ${end}] span ${end - begin} bytes; shape ${describeValue(shape)} of ${dtype} needs ${numel * elemBytes}`, name);
  }
  return { name, dtype, shape: Object.freeze((shape as number[]).slice()), numel, begin, end };
}

/**
 * Parse a whole safetensors file held in memory.
 *
 * @param bytes the complete file.
 * @param file label for error messages.
 * @returns the validated header and `tensor(name)`, which returns a zero-copy view of that tensor's
 *   bytes inside `bytes` (not necessarily aligned for typed-array views; copy with `.slice()` first).
 * @throws SafetensorsError as {@link decodeSafetensorsHeaderLength} and {@link parseSafetensorsHeader};
 *   `tensor()` throws for an unknown name.
 */
export function parseSafetensorsBytes(bytes: Uint8Array, file = "<memory>"): { header: SafetensorsHeader; tensor(name: string): Uint8Array } {
  const n = decodeSafetensorsHeaderLength(bytes.subarray(0, 8), bytes.length, file);
  const header = parseSafetensorsHeader(bytes.subarray(8, 8 + n), bytes.length - 8 - n, file);
  return {
    header,
    tensor(name: string): Uint8Array {
      const t = header.byName.get(name);
      if (t === undefined) throw new SafetensorsError(file, "no such tensor", name);
      return bytes.subarray(header.dataStart + t.begin, header.dataStart + t.end);
    },
  };
}

/** Refuse a path that exists but is not a regular file (checked before open(2): opening a FIFO
 * blocks until a writer comes, SIGTERM included). A missing path is left to open's ENOENT.
 * @param expected what the file should be, for the message.
 * @throws SafetensorsError naming the path and what it is. */
export function checkRegularFile(path: string, expected = "a .safetensors file"): void {
  let st;
  try {
    st = statSync(path);
  } catch {
    return;
  }
  if (!st.isFile()) throw new SafetensorsError(path, `is not a regular file (${st.isDirectory() ? "a directory" : st.isFIFO() ? "a FIFO" : "a device or socket"}); expected ${expected}`);
}

/** Read exactly `len` bytes at absolute `pos` into `dst` (offset `dstOff`), or throw. */
function readFully(fd: number, dst: Uint8Array, dstOff: number, len: number, pos: number, file: string, what: string): void {
  let done = 0;
  while (done < len) {
    const got = readSync(fd, dst, dstOff + done, len - done, pos + done);
    if (got <= 0) throw new SafetensorsError(file, `unexpected end of file reading ${what} (${done} of ${len} bytes at offset ${pos})`);
    done += got;
  }
}

/**
 * Streaming reader: validates the header on open, then reads one tensor at a time.
 *
 * Memory: the header bytes (bounded by the file size and {@link SAFETENSORS_MAX_HEADER_BYTES}) plus
 * whatever tensor the caller asks for. Call {@link close} when done (or use `using`).
 */
export class SafetensorsReader {
  private fd: number;

  private constructor(
    /** Path of the file. */
    readonly path: string,
    fd: number,
    /** The validated header. */
    readonly header: SafetensorsHeader,
  ) {
    this.fd = fd;
  }

  /**
   * Open and validate a file.
   * @throws SafetensorsError for a malformed header (see {@link parseSafetensorsHeader}) or a path
   *   that is not a regular file (a directory; a FIFO, whose open would block until a writer
   *   comes); the usual `fs` errors (ENOENT…) for a missing or unreadable file.
   */
  static open(path: string): SafetensorsReader {
    checkRegularFile(path);
    const fd = openSync(path, "r");
    try {
      const size = fstatSync(fd).size;
      const first8 = new Uint8Array(8);
      if (size >= 8) readFully(fd, first8, 0, 8, 0, path, "the header length");
      const n = decodeSafetensorsHeaderLength(first8, size, path);
      const json = new Uint8Array(n);
      readFully(fd, json, 0, n, 8, path, "the header");
      const header = parseSafetensorsHeader(json, size - 8 - n, path);
      return new SafetensorsReader(path, fd, header);
    } catch (e) {
      closeSync(fd);
      throw e;
    }
  }

  /** Tensor names in file order. */
  names(): string[] {
    return this.header.tensors.map((t) => t.name);
  }

  /** The header entry of `name`. @throws SafetensorsError when absent. */
  info(name: string): SafetensorsTensorInfo {
    const t = this.header.byName.get(name);
    if (t === undefined) throw new SafetensorsError(this.path, "no such tensor", name);
    return t;
  }

  /**
   * Read one tensor's raw little-endian bytes into a fresh, 8-byte-aligned buffer (so typed-array
   * views of any dtype can be made on `result.buffer`).
   * @throws SafetensorsError for an unknown name, a closed reader, or a file truncated since open.
   */
  readTensorBytes(name: string): Uint8Array {
    const t = this.info(name);
    const out = new Uint8Array(t.end - t.begin);
    this.readTensorInto(name, out);
    return out;
  }

  /**
   * Read one tensor's bytes into `dst` (which must be exactly the tensor's byte length).
   * @throws SafetensorsError on a size mismatch, unknown name, closed reader or truncated file.
   */
  readTensorInto(name: string, dst: Uint8Array): void {
    if (this.fd < 0) throw new SafetensorsError(this.path, "reader is closed", name);
    const t = this.info(name);
    const len = t.end - t.begin;
    if (dst.length !== len) throw new SafetensorsError(this.path, `destination is ${dst.length} bytes; tensor is ${len}`, name);
    readFully(this.fd, dst, 0, len, this.header.dataStart + t.begin, this.path, `tensor ${quoteUntrusted(name)}`);
  }

  /**
   * Read elements `[start, start + count)` of a tensor (flattened row-major) into a fresh,
   * 8-byte-aligned buffer, without reading the rest — e.g. the slice of a flattened parameter that
   * one rank owns under ZeRO partitioning.
   * @throws SafetensorsError when `start`/`count` are not non-negative integers or run past the tensor.
   */
  readTensorElements(name: string, start: number, count: number): Uint8Array {
    if (this.fd < 0) throw new SafetensorsError(this.path, "reader is closed", name);
    const t = this.info(name);
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(count) || start < 0 || count < 0 || start + count > t.numel) {
      throw new SafetensorsError(this.path, `element range [${start}, ${start + count}) is outside [0, ${t.numel})`, name);
    }
    const size = SAFETENSORS_DTYPE_BYTES[t.dtype];
    const out = new Uint8Array(count * size);
    readFully(this.fd, out, 0, out.length, this.header.dataStart + t.begin + start * size, this.path, `tensor ${quoteUntrusted(name)}`);
    return out;
  }

  /** Close the file. Idempotent. */
  close(): void {
    if (this.fd >= 0) {
      closeSync(this.fd);
      this.fd = -1;
    }
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** Bytes of any typed array / DataView as a Uint8Array view (no copy). */
function asBytes(data: ArrayBufferView): Uint8Array {
  return data instanceof Uint8Array ? data : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * Build the header bytes for `specs`, laid out in the given order, padded with spaces so the data
 * section starts at a multiple of 8 bytes (as the Python `safetensors` writer does).
 * @returns the header JSON bytes (without the 8-byte length) and each tensor's [begin, end).
 * @throws SafetensorsError for duplicate or reserved names, unknown dtypes, bad shapes, or a
 *   non-string metadata value.
 */
export function buildSafetensorsHeader(
  specs: readonly SafetensorsTensorSpec[],
  metadata: Readonly<Record<string, string>> | null,
  file: string,
): { json: Uint8Array; offsets: Array<[number, number]>; dataBytes: number } {
  const obj: Record<string, unknown> = {};
  if (metadata !== null) {
    for (const [k, v] of Object.entries(metadata)) {
      if (typeof v !== "string") throw new SafetensorsError(file, `__metadata__[${quoteUntrusted(k)}] must be a string`);
    }
    obj.__metadata__ = { ...metadata };
  }
  const seen = new Set<string>();
  const offsets: Array<[number, number]> = [];
  let off = 0;
  for (const s of specs) {
    if (s.name === "__metadata__") throw new SafetensorsError(file, "the name __metadata__ is reserved", s.name);
    if (seen.has(s.name)) throw new SafetensorsError(file, "duplicate tensor name", s.name);
    seen.add(s.name);
    if (!isSafetensorsDType(s.dtype)) throw new SafetensorsError(file, `unknown dtype ${JSON.stringify(s.dtype)}`, s.name);
    for (const d of s.shape) {
      if (!Number.isSafeInteger(d) || d < 0) throw new SafetensorsError(file, `shape ${JSON.stringify(s.shape)} must hold non-negative integers`, s.name);
    }
    const numel = shapeNumel(s.shape);
    if (numel < 0) throw new SafetensorsError(file, `shape ${JSON.stringify(s.shape)} has more than 2^53 elements`, s.name);
    const len = numel * SAFETENSORS_DTYPE_BYTES[s.dtype];
    offsets.push([off, off + len]);
    obj[s.name] = { dtype: s.dtype, shape: [...s.shape], data_offsets: [off, off + len] };
    off += len;
  }
  let text = JSON.stringify(obj);
  let json = new TextEncoder().encode(text);
  const pad = (8 - ((8 + json.length) % 8)) % 8;
  if (pad > 0) {
    text += " ".repeat(pad);
    json = new TextEncoder().encode(text);
  }
  if (json.length > SAFETENSORS_MAX_HEADER_BYTES) throw new SafetensorsError(file, `header would be ${json.length} bytes, over the ${SAFETENSORS_MAX_HEADER_BYTES}-byte limit`);
  return { json, offsets, dataBytes: off };
}

/**
 * Streaming writer. The tensor list is fixed at {@link create}; bytes are then written in that
 * order, each tensor whole ({@link writeTensor}) or in consecutive parts ({@link writeTensorPart}),
 * into `<path>.tmp-<pid>-<random>` in the same directory. {@link finish} checks that every tensor
 * was written in full, fsyncs, closes and renames onto `path` (atomic on POSIX); {@link abort}
 * removes the temporary file.
 */
export class SafetensorsWriter {
  private fd: number;
  private index = 0;
  private written = 0;
  private pos: number;
  private readonly tmpPath: string;

  private constructor(
    /** Final path. */
    readonly path: string,
    private readonly specs: readonly SafetensorsTensorSpec[],
    private readonly offsets: ReadonlyArray<[number, number]>,
    tmpPath: string,
    fd: number,
    pos: number,
  ) {
    this.tmpPath = tmpPath;
    this.fd = fd;
    this.pos = pos;
  }

  /**
   * Create the temporary file and write the header.
   * @param path final file path.
   * @param specs tensors in the order their bytes will be written.
   * @param metadata optional `__metadata__` string map.
   * @throws SafetensorsError for invalid specs (see {@link buildSafetensorsHeader}); fs errors for an unwritable directory.
   */
  static create(path: string, specs: readonly SafetensorsTensorSpec[], metadata: Readonly<Record<string, string>> | null = null): SafetensorsWriter {
    const { json, offsets } = buildSafetensorsHeader(specs, metadata, path);
    const tmpPath = join(dirname(path), `.${basename(path)}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 10)}`);
    const fd = openSync(tmpPath, "wx");
    try {
      const lenBytes = new Uint8Array(8);
      new DataView(lenBytes.buffer).setUint32(0, json.length, true);
      writeFully(fd, lenBytes, 0, tmpPath);
      writeFully(fd, json, 8, tmpPath);
    } catch (e) {
      closeSync(fd);
      unlinkSync(tmpPath);
      throw e;
    }
    const w = new SafetensorsWriter(path, specs, offsets, tmpPath, fd, 8 + json.length);
    w.skipEmpty();
    return w;
  }

  /** Name of the tensor whose bytes are expected next, or null when all are written. */
  get next(): string | null {
    return this.index < this.specs.length ? this.specs[this.index].name : null;
  }

  /**
   * Write a whole tensor. `data`'s bytes are written as they are (little-endian host order).
   * @throws SafetensorsError when `name` is not the next tensor or `data.byteLength` is not its size.
   */
  writeTensor(name: string, data: ArrayBufferView): void {
    const need = this.remaining(name);
    if (this.written !== 0 || data.byteLength !== need) {
      throw new SafetensorsError(this.path, `writeTensor got ${data.byteLength} bytes; expected ${need}${this.written ? " (a part was already written)" : ""}`, name);
    }
    this.writeTensorPart(name, data);
  }

  /**
   * Append the next part of tensor `name`; the tensor is complete once its byte size is reached.
   * @throws SafetensorsError when `name` is not the tensor being written or the part overruns it.
   */
  writeTensorPart(name: string, data: ArrayBufferView): void {
    const need = this.remaining(name);
    if (data.byteLength > need) throw new SafetensorsError(this.path, `part of ${data.byteLength} bytes overruns the ${need} bytes left`, name);
    const bytes = asBytes(data);
    writeFully(this.fd, bytes, this.pos, this.tmpPath);
    this.pos += bytes.length;
    this.written += bytes.length;
    const [b, e] = this.offsets[this.index];
    if (this.written === e - b) {
      this.index++;
      this.written = 0;
      this.skipEmpty();
    }
  }

  /**
   * Flush to disk and rename onto the final path.
   * @throws SafetensorsError when some tensor was not written in full (the temporary file is removed);
   *   the fs error when the rename fails (the temporary file is removed).
   */
  finish(): void {
    if (this.fd < 0) throw new SafetensorsError(this.path, "writer already finished or aborted");
    if (this.index < this.specs.length) {
      const missing = this.specs[this.index].name;
      this.abort();
      throw new SafetensorsError(this.path, "finish() before all tensors were written; first incomplete one is this", missing);
    }
    fsyncSync(this.fd);
    closeSync(this.fd);
    this.fd = -1;
    try {
      renameSync(this.tmpPath, this.path);
    } catch (e) {
      // e.g. the final path is a directory: do not leave the temporary file behind
      try {
        unlinkSync(this.tmpPath);
      } catch {
        // already gone
      }
      throw e;
    }
    try {
      const dfd = openSync(dirname(this.path), "r");
      try {
        fsyncSync(dfd);
      } finally {
        closeSync(dfd);
      }
    } catch {
      // Directory fsync is best effort (not supported on every filesystem).
    }
  }

  /** Close and delete the temporary file. Idempotent. */
  abort(): void {
    if (this.fd < 0) return;
    closeSync(this.fd);
    this.fd = -1;
    try {
      unlinkSync(this.tmpPath);
    } catch {
      // already gone
    }
  }

  [Symbol.dispose](): void {
    this.abort();
  }

  private remaining(name: string): number {
    if (this.fd < 0) throw new SafetensorsError(this.path, "writer already finished or aborted", name);
    if (this.index >= this.specs.length) throw new SafetensorsError(this.path, "all declared tensors are already written", name);
    const expect = this.specs[this.index].name;
    if (name !== expect) throw new SafetensorsError(this.path, `tensors must be written in declared order; expected ${quoteUntrusted(expect)} next`, name);
    const [b, e] = this.offsets[this.index];
    return e - b - this.written;
  }

  private skipEmpty(): void {
    while (this.index < this.specs.length && this.offsets[this.index][0] === this.offsets[this.index][1]) this.index++;
  }
}

/** Write all of `bytes` at `pos`. @throws CheckpointWriteError naming `file` for a system error
 * (disk full, quota, read-only file system, …). */
function writeFully(fd: number, bytes: Uint8Array, pos: number, file: string): void {
  let done = 0;
  while (done < bytes.length) {
    const n = writingFile(file, "write", () => writeSync(fd, bytes, done, bytes.length - done, pos + done));
    if (n <= 0) throw new SafetensorsError(file, `write returned ${n} at offset ${pos + done}`);
    done += n;
  }
}

/** A tensor with its bytes, for {@link writeSafetensors}. */
export interface SafetensorsTensor extends SafetensorsTensorSpec {
  /** Little-endian element data; `byteLength` must equal `numel × dtype size`. */
  data: ArrayBufferView;
}

/**
 * Write a whole file in one call (through {@link SafetensorsWriter}, so atomically).
 * @throws SafetensorsError for invalid specs or a data length that does not match a shape.
 */
export function writeSafetensors(path: string, tensors: readonly SafetensorsTensor[], metadata: Readonly<Record<string, string>> | null = null): void {
  const w = SafetensorsWriter.create(path, tensors, metadata);
  try {
    for (const t of tensors) {
      const need = shapeNumel(t.shape) * SAFETENSORS_DTYPE_BYTES[t.dtype];
      if (t.data.byteLength !== need) throw new SafetensorsError(path, `data is ${t.data.byteLength} bytes; shape ${JSON.stringify(t.shape)} of ${t.dtype} needs ${need}`, t.name);
      if (need > 0) w.writeTensor(t.name, t.data);
    }
    w.finish();
  } catch (e) {
    w.abort();
    throw e;
  }
}
