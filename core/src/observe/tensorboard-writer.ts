/**
 * TensorBoard event files (`tensorboard {enabled, output_path, job_name}`): rank 0 writes
 * `<output_path>/<job_name>/events.out.tfevents.<unix seconds>.<hostname>` as TensorFlow's
 * `SummaryWriter` (and DeepSpeed's, through torch.utils.tensorboard) does — a TFRecord file of
 * `tensorflow.Event` protocol buffers: first an event with `file_version "brain.Event:2"`, then one
 * event per scalar with `summary.value[0] {tag, simple_value}`.
 *
 * TFRecord framing (tensorflow/core/lib/io/record_writer.cc): uint64 length (little-endian),
 * uint32 masked CRC-32C of the length bytes, the data, uint32 masked CRC-32C of the data, where
 * masked(c) = ((c >>> 15) | (c << 17)) + 0xa282ead8 (mod 2³²). CRC-32C is computed by the
 * maintained `@aws-crypto/crc32c` package. The few protobuf fields are encoded here (no maintained
 * npm package writes event files without TensorFlow's native library):
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
 *   Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; }
 * (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto). A test reads the
 * file back with the Python `tensorboard` package's EventFileLoader.
 */
import { crc32c } from "@aws-crypto/crc32c";
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { monitorDir, type MonitorConfig, type MonitorEvent } from "./csv-monitor.ts";

/** Masked CRC-32C of TFRecord. */
export function maskedCrc32c(data: Uint8Array): number {
  const c = crc32c(data) >>> 0;
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

/** Protobuf writer for the few wire types events need. */
class Proto {
  private parts: number[] = [];
  varint(v: number | bigint): this {
    let x = BigInt.asUintN(64, BigInt(v));
    do {
      let b = Number(x & 0x7fn);
      x >>= 7n;
      if (x > 0n) b |= 0x80;
      this.parts.push(b);
    } while (x > 0n);
    return this;
  }
  key(field: number, wire: number): this {
    return this.varint((field << 3) | wire);
  }
  double(field: number, v: number): this {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, v, true);
    this.key(field, 1).parts.push(...b);
    return this;
  }
  float(field: number, v: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.key(field, 5).parts.push(...b);
    return this;
  }
  bytes(field: number, data: Uint8Array): this {
    this.key(field, 2).varint(data.length).parts.push(...data);
    return this;
  }
  string(field: number, s: string): this {
    return this.bytes(field, new TextEncoder().encode(s));
  }
  finish(): Uint8Array {
    return Uint8Array.from(this.parts);
  }
}

/** One `tensorflow.Event` with a scalar (or, without `scalar`, the file_version event). */
export function encodeEvent(wallTime: number, step: number, scalar?: { tag: string; value: number }): Uint8Array {
  const e = new Proto().double(1, wallTime).key(2, 0).varint(Math.trunc(step));
  if (!scalar) return e.string(3, "brain.Event:2").finish();
  const value = new Proto().string(1, scalar.tag).float(2, scalar.value).finish();
  const summary = new Proto().bytes(1, value).finish();
  return e.bytes(5, summary).finish();
}

/** One TFRecord around `data`. */
export function tfRecord(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(16 + data.length);
  const dv = new DataView(out.buffer);
  dv.setBigUint64(0, BigInt(data.length), true);
  dv.setUint32(8, maskedCrc32c(out.subarray(0, 8)), true);
  out.set(data, 12);
  dv.setUint32(12 + data.length, maskedCrc32c(data), true);
  return out;
}

/** Writes one event file (module comment). Create it on rank 0 only. */
export class TensorBoardWriter {
  readonly file: string;

  /** @throws Error naming the folder when it cannot be created or written. */
  constructor(c: MonitorConfig, now: () => number = () => Date.now() / 1000) {
    const dir = monitorDir(c, "tensorboard");
    const t = now();
    this.file = join(dir, `events.out.tfevents.${Math.floor(t)}.${hostname()}`);
    try {
      mkdirSync(dir, { recursive: true });
      writeFileSync(this.file, tfRecord(encodeEvent(t, 0)));
    } catch (e) {
      throw new Error(`tensorboard: cannot write ${this.file}: ${(e as Error).message}`);
    }
    this.now = now;
  }
  private readonly now: () => number;

  /** Append scalar events. */
  write(events: readonly MonitorEvent[]): void {
    if (events.length === 0) return;
    const t = this.now();
    const recs = events.map(([tag, value, step]) => tfRecord(encodeEvent(t, step, { tag, value })));
    const all = new Uint8Array(recs.reduce((s, r) => s + r.length, 0));
    let o = 0;
    for (const r of recs) {
      all.set(r, o);
      o += r.length;
    }
    appendFileSync(this.file, all);
  }
}
