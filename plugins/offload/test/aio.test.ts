/**
 * The nvme I/O engine (src/aio.ts): every `aio` key shapes the requests — block_size cuts aligned
 * blocks, thread_count deals them to streams, single_submit false coalesces queue_depth blocks into
 * one vectored request, overlap_events bounds requests in flight — and data round-trips exactly at
 * awkward sizes and unaligned offsets (random bytes).
 */
import { afterAll, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { closeSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Aio } from "../src/aio.ts";

const dir = mkdtempSync(join(tmpdir(), "offload-aio-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function bytes(n: number, seed: number): Uint8Array {
  const a = new Uint8Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    a[i] = s >>> 24;
  }
  return a;
}

const base = { block_size: 4096, queue_depth: 4, thread_count: 1, single_submit: true, overlap_events: true };

test("round trips at awkward sizes and offsets under every setting", async () => {
  const fd = openSync(join(dir, "f.bin"), "w+");
  try {
    let seed = 1;
    for (const single_submit of [true, false]) for (const overlap_events of [true, false]) for (const thread_count of [1, 3]) {
      const aio = new Aio({ ...base, single_submit, overlap_events, thread_count, queue_depth: 3 });
      for (const [n, pos] of [[1, 0], [4095, 4096], [4097, 12288], [50_001, 777], [3 * 4096, 8192]] as const) {
        const data = bytes(n, seed++);
        await aio.write(fd, data, pos);
        const back = new Uint8Array(n);
        await aio.read(fd, back, pos);
        expect(Buffer.compare(Buffer.from(back), Buffer.from(data))).toBe(0);
      }
    }
  } finally {
    closeSync(fd);
  }
});

test("request counts follow block_size, single_submit and thread_count", async () => {
  const fd = openSync(join(dir, "g.bin"), "w+");
  try {
    const n = 10 * 4096; // 10 aligned blocks
    const one = new Aio({ ...base, single_submit: true });
    await one.write(fd, bytes(n, 9), 0);
    expect(one.stats.writes).toBe(10);
    const coalesced = new Aio({ ...base, single_submit: false, queue_depth: 4 });
    await coalesced.write(fd, bytes(n, 9), 0);
    expect(coalesced.stats.writes).toBe(3); // 4 + 4 + 2 blocks
    const streams = new Aio({ ...base, single_submit: false, queue_depth: 4, thread_count: 2 });
    await streams.read(fd, new Uint8Array(n), 0);
    expect(streams.stats.reads).toBe(4); // 5 blocks per stream: 4 + 1 each
    const unaligned = new Aio({ ...base, block_size: 8192 });
    await unaligned.read(fd, new Uint8Array(8192), 4096); // crosses one block boundary: 2 requests
    expect(unaligned.stats.reads).toBe(2);
    expect(streams.stats.bytesRead).toBe(n);
  } finally {
    closeSync(fd);
  }
});
