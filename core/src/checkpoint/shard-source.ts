/**
 * Read any element range of any unit state from a saved checkpoint, whatever world size saved it.
 *
 * A unit's flat order is the same at every world size (core/src/nn/unit.ts), so a range of a unit
 * in the loading job maps to the same range in the saved one; the manifest's `pieces` say which
 * rank file holds which part, and inside a file the records (chunks of at most a few MB) say which
 * elements each holds. Reading streams chunk by chunk: only the chunks that overlap the request are
 * decompressed, and each overlap is handed to the caller before the next is read — this is how
 * resharding (save at world N, load at world M) happens on load, without a conversion step.
 *
 * Construction opens every rank file and checks it against the manifest (manifest.ts
 * `verifyRankFile`: rank, tag, world size, size, record count, index digest) before anything is
 * read, so a resume from mixed saves fails up front naming the file and what disagrees.
 */
import { join } from "node:path";
import { CheckpointError } from "./errors.ts";
import { rankFileName, verifyRankFile, type CheckpointManifest, type ManifestUnit, type UnitStateName } from "./manifest.ts";
import { RECORD_DTYPE_BYTES, RecordFileReader, type RecordDType, type RecordEntry } from "./record-file.ts";
import { quoteUntrusted } from "../config/quote-untrusted.ts";

/** Name of the record holding elements from `start` of a unit state. */
export function recordName(unit: string, state: UnitStateName, start: number): string {
  return `${unit}/${state}/${start}`;
}

/** Parse a record name written by {@link recordName}; null when it does not have that form. */
export function parseRecordName(name: string): { unit: string; state: UnitStateName; start: number } | null {
  const m = /^(.+)\/(params|master|m|v)\/(\d+)$/.exec(name);
  if (!m) return null;
  return { unit: m[1]!, state: m[2] as UnitStateName, start: Number(m[3]) };
}

/** A piece of a requested range: `n` elements at offset `at` of the range, as raw little-endian
 * bytes (aligned to the element size). */
export interface RangeChunk {
  at: number;
  n: number;
  dtype: RecordDType;
  bytes: Uint8Array;
}

/** See the module comment. Open rank files are cached; call {@link close} when done. */
export class ShardSource {
  private readonly readers = new Map<number, RecordFileReader>();
  private readonly byUnitState = new Map<number, Map<string, RecordEntry[]>>();
  private readonly units = new Map<string, ManifestUnit>();
  /** Payload bytes decompressed so far (for throughput figures). */
  bytesRead = 0;

  /** Opens and verifies every rank file (see the module comment).
   * @throws CheckpointError naming the rank file that is missing, damaged or from another save. */
  constructor(
    readonly tagDir: string,
    readonly manifest: CheckpointManifest,
  ) {
    for (const u of manifest.units) this.units.set(u.name, u);
    try {
      for (let r = 0; r < manifest.world_size; r++) this.reader(r);
    } catch (e) {
      this.close();
      throw e;
    }
  }

  /** The manifest entry of unit `name`. @throws CheckpointError when the checkpoint lacks it. */
  unit(name: string): ManifestUnit {
    const u = this.units.get(name);
    if (!u) throw new CheckpointError(join(this.tagDir, "manifest.json"), `has no unit ${quoteUntrusted(name)}`);
    return u;
  }

  private reader(rank: number): { r: RecordFileReader; map: Map<string, RecordEntry[]> } {
    let r = this.readers.get(rank);
    if (!r) {
      const opened = RecordFileReader.open(join(this.tagDir, rankFileName(rank)));
      try {
        verifyRankFile(this.manifest, rank, opened);
      } catch (e) {
        opened.close();
        throw e;
      }
      r = opened;
      const map = new Map<string, RecordEntry[]>();
      for (const e of r.records) {
        const p = parseRecordName(e.name);
        if (!p || p.start !== e.start) throw new CheckpointError(r.path, `record name does not match its start ${e.start}`, e.name);
        const key = `${p.unit}/${p.state}`;
        let list = map.get(key);
        if (!list) map.set(key, (list = []));
        list.push(e);
      }
      for (const list of map.values()) list.sort((a, b) => a.start - b.start);
      this.readers.set(rank, r);
      this.byUnitState.set(rank, map);
    }
    return { r, map: this.byUnitState.get(rank)! };
  }

  /**
   * Stream elements [start, start + count) of `state` of unit `unit` to `sink`, in ascending order.
   * @throws CheckpointError naming the file and record for a missing or damaged record, or when
   *   the records do not cover the range.
   */
  readRange(unit: string, state: UnitStateName, start: number, count: number, sink: (c: RangeChunk) => void): void {
    const u = this.unit(unit);
    if (start < 0 || start + count > u.numel) throw new CheckpointError(this.tagDir, `range [${start}, ${start + count}) outside unit ${quoteUntrusted(unit)} of ${u.numel} elements`);
    if (!u.states.includes(state)) throw new CheckpointError(join(this.tagDir, "manifest.json"), `unit ${quoteUntrusted(unit)} has no ${quoteUntrusted(state)} state (saved states: ${u.states.join(", ")})`);
    const end = start + count;
    let covered = 0;
    for (const { r, e, a, b } of this.overlaps(u, state, start, count)) {
      const payload = r.readPayload(e);
      this.bytesRead += payload.byteLength;
      const sz = RECORD_DTYPE_BYTES[e.dtype];
      sink({ at: a - start, n: b - a, dtype: e.dtype, bytes: payload.subarray((a - e.start) * sz, (b - e.start) * sz) });
      covered += b - a;
    }
    if (covered !== count) throw new CheckpointError(this.tagDir, `records cover ${covered} of the ${count} elements [${start}, ${end}) of unit ${quoteUntrusted(unit)} state ${quoteUntrusted(state)}: rank files incomplete`);
  }

  /** Elements of [start, start + count) of a state that the rank files' indexes hold (no payload
   * is read). Used to check a range before allocating for it. */
  coverage(unit: string, state: UnitStateName, start: number, count: number): number {
    let covered = 0;
    for (const { a, b } of this.overlaps(this.unit(unit), state, start, count)) covered += b - a;
    return covered;
  }

  /** The records of `state` of `u` that overlap [start, start + count), within the manifest's
   * pieces, in ascending order: each with its reader and the overlap [a, b) in unit elements. */
  private *overlaps(u: ManifestUnit, state: UnitStateName, start: number, count: number): Generator<{ r: RecordFileReader; e: RecordEntry; a: number; b: number }> {
    const end = start + count;
    for (const piece of u.pieces) {
      const lo = Math.max(start, piece.start);
      const hi = Math.min(end, piece.start + piece.count);
      if (lo >= hi) continue;
      const { r, map } = this.reader(piece.rank);
      for (const e of map.get(`${u.name}/${state}`) ?? []) {
        const a = Math.max(lo, e.start);
        const b = Math.min(hi, e.start + e.count);
        if (a < b) yield { r, e, a, b };
      }
    }
  }

  /** Elements [start, start + count) of a state as one f32 array (16-bit states widened exactly).
   * The range is checked against the records first, so a damaged manifest cannot make it
   * allocate more than the rank files hold. */
  readF32(unit: string, state: UnitStateName, start: number, count: number): Float32Array {
    const have = this.coverage(unit, state, start, count);
    if (have !== count) throw new CheckpointError(this.tagDir, `records cover ${have} of the ${count} elements [${start}, ${start + count}) of unit ${quoteUntrusted(unit)} state ${quoteUntrusted(state)}: rank files incomplete or manifest damaged`);
    const out = new Float32Array(count);
    this.readRange(unit, state, start, count, (c) => {
      if (c.dtype === "f32") out.set(new Float32Array(c.bytes.buffer, c.bytes.byteOffset, c.n), c.at);
      else if (c.dtype === "bf16") {
        const src = new Uint16Array(c.bytes.buffer, c.bytes.byteOffset, c.n);
        const dst = new Uint32Array(out.buffer, out.byteOffset + c.at * 4, c.n);
        for (let i = 0; i < c.n; i++) dst[i] = src[i]! << 16;
      } else if (c.dtype === "f16") out.set(Float32Array.from(new Float16Array(c.bytes.buffer, c.bytes.byteOffset, c.n)), c.at);
      else throw new CheckpointError(this.tagDir, `unit ${quoteUntrusted(unit)} state ${quoteUntrusted(state)} holds ${c.dtype}, not a float type`);
    });
    return out;
  }

  /** Verify every record of every rank file (CRC, decode, size). @throws CheckpointError. */
  verifyAll(): void {
    for (let r = 0; r < this.manifest.world_size; r++) this.reader(r).r.verifyAll();
  }

  /** Close all open rank files. */
  close(): void {
    for (const r of this.readers.values()) r.close();
    this.readers.clear();
    this.byUnitState.clear();
  }
}
