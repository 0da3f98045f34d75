/**
 * A TFRecord reader for tests: splits a file into records and checks both masked CRC-32C of each
 * (tensorflow/core/lib/io/record_reader.cc), independent of the writer's framing code.
 */
import { crc32c } from "@aws-crypto/crc32c";

function masked(b: Uint8Array): number {
  const c = crc32c(b) >>> 0;
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

/** The records of `buf`. @throws on a truncated record or a CRC mismatch (naming the offset). */
export function readTfRecords(buf: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let o = 0;
  while (o < buf.length) {
    if (o + 12 > buf.length) throw new Error(`truncated header at ${o}`);
    const n = Number(dv.getBigUint64(o, true));
    if (dv.getUint32(o + 8, true) !== masked(buf.subarray(o, o + 8))) throw new Error(`length CRC mismatch at ${o}`);
    if (o + 16 + n > buf.length) throw new Error(`truncated record at ${o}`);
    const data = buf.subarray(o + 12, o + 12 + n);
    if (dv.getUint32(o + 12 + n, true) !== masked(data)) throw new Error(`data CRC mismatch at ${o}`);
    out.push(data);
    o += 16 + n;
  }
  return out;
}
