/**
 * File I/O of nvme offload, shaped by DeepSpeed's `aio` keys (its libaio engine; here Bun's
 * asynchronous fs calls on numeric descriptors, which run on a thread pool):
 *
 * - `block_size`: a transfer is cut into blocks of this many bytes at block-aligned file offsets
 *   (state regions are aligned to it), the last one shorter;
 * - `thread_count`: the blocks are dealt to this many streams (contiguous ranges) that run at once;
 * - `single_submit`: true — each block is its own request; false — a stream submits `queue_depth`
 *   consecutive blocks as one vectored request (readv/writev: one call for the whole queue);
 * - `queue_depth` with `overlap_events`: true — a stream keeps up to `queue_depth` requests in flight,
 *   submitting the next as one completes; false — it waits for each request before the next.
 *
 * `stats` counts requests and bytes (tests check the shapes; the bench reports throughput).
 */
import { readv, writev } from "node:fs";
import { promisify } from "node:util";
import type { JobConfig } from "@zeromoe/core/config";
import { withPath } from "./path-error.ts";

const readvP = promisify(readv);
const writevP = promisify(writev);

/** The `aio` section. */
export type AioSettings = JobConfig["aio"];

/** Requests and bytes so far. */
export interface AioStats {
  reads: number;
  writes: number;
  bytesRead: number;
  bytesWritten: number;
}

/** `parts` without their first `n` bytes (views, no copy). */
function skipBytes(parts: readonly Uint8Array[], n: number): Uint8Array[] {
  if (n === 0) return parts as Uint8Array[];
  const out: Uint8Array[] = [];
  for (const p of parts) {
    if (n >= p.byteLength) n -= p.byteLength;
    else {
      out.push(n > 0 ? p.subarray(n) : p);
      n = 0;
    }
  }
  return out;
}

/** The I/O engine (see the module comment). */
export class Aio {
  readonly settings: AioSettings;
  readonly stats: AioStats = { reads: 0, writes: 0, bytesRead: 0, bytesWritten: 0 };
  constructor(settings: AioSettings) {
    this.settings = settings;
  }

  /**
   * Fill `buf` from file `fd` at byte `pos`; `file` (the path) is named in errors. A partial read is
   * continued (POSIX allows one); reading nothing (end of file) is an error.
   * @throws the system error (its code kept, the file appended) or a short read at end of file
   */
  read(fd: number, buf: Uint8Array, pos: number, file?: string): Promise<void> {
    return this.run(buf, pos, async (parts, at) => {
      const want = parts.reduce((s, p) => s + p.byteLength, 0);
      let done = 0;
      while (done < want) {
        const r = await readvP(fd, skipBytes(parts, done), at + done).catch((e) => Promise.reject(withPath(e, file)));
        if (r.bytesRead === 0) throw new Error(`nvme offload: short read of ${done} of ${want} bytes at offset ${at}${file ? ` of ${file}` : ""} (end of file)`);
        done += r.bytesRead;
      }
      this.stats.reads++;
      this.stats.bytesRead += want;
    });
  }

  /**
   * Write `buf` to file `fd` at byte `pos`; `file` (the path) is named in errors. A partial write is
   * continued, so a full drive or a file-size limit surfaces as its system error (ENOSPC, EFBIG, …)
   * instead of an anonymous short write.
   * @throws the system error (its code kept, the file appended), or a short write when nothing more
   *   can be written without one
   */
  write(fd: number, buf: Uint8Array, pos: number, file?: string): Promise<void> {
    return this.run(buf, pos, async (parts, at) => {
      const want = parts.reduce((s, p) => s + p.byteLength, 0);
      let done = 0;
      while (done < want) {
        const r = await writevP(fd, skipBytes(parts, done), at + done).catch((e) => Promise.reject(withPath(e, file)));
        if (r.bytesWritten === 0) throw new Error(`nvme offload: short write of ${done} of ${want} bytes at offset ${at}${file ? ` of ${file}` : ""}`);
        done += r.bytesWritten;
      }
      this.stats.writes++;
      this.stats.bytesWritten += want;
    });
  }

  private async run(buf: Uint8Array, pos: number, op: (parts: Uint8Array[], at: number) => Promise<void>): Promise<void> {
    const { block_size: bs, thread_count, single_submit, queue_depth, overlap_events } = this.settings;
    const blocks: [number, number][] = [];
    // first block ends at the next block boundary of the file, so later requests are aligned
    for (let o = 0; o < buf.byteLength;) {
      const end = Math.min(buf.byteLength, o + (bs - ((pos + o) % bs)));
      blocks.push([o, end]);
      o = end;
    }
    const streams = Math.max(1, Math.min(thread_count, blocks.length));
    const per = Math.ceil(blocks.length / streams);
    const perRequest = single_submit ? 1 : queue_depth;
    const inFlight = overlap_events ? queue_depth : 1;
    const runStream = async (bl: [number, number][]) => {
      const reqs: [number, number][][] = [];
      for (let i = 0; i < bl.length; i += perRequest) reqs.push(bl.slice(i, i + perRequest));
      let next = 0;
      const worker = async () => {
        while (next < reqs.length) {
          const r = reqs[next++]!;
          await op(r.map(([a, b]) => buf.subarray(a, b)), pos + r[0]![0]);
        }
      };
      await Promise.all(Array.from({ length: Math.min(inFlight, reqs.length) }, worker));
    };
    const all: Promise<void>[] = [];
    for (let s = 0; s < streams; s++) {
      const bl = blocks.slice(s * per, (s + 1) * per);
      if (bl.length > 0) all.push(runStream(bl));
    }
    await Promise.all(all);
  }
}
