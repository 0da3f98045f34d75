/**
 * The bound of the webgpu backend's buffer pool (fixed, or adaptive: the high-water mark of the
 * program's live buffer bytes, at least 1 GiB) and the submission timeline (`timeline: true`: every
 * submitted batch timed on the GPU as a whole) — results unchanged by either, at awkward sizes on
 * random data.
 */
import { describe, expect, test } from "bun:test";
import { createGPU } from "../../src/ffi/index.ts";
import { randomF32 } from "../../src/testing.ts";
import { BufferPool } from "../../src/webgpu/buffer-pool.ts";
import { MIN_AUTO_POOL_BYTES, WebGpuBackend } from "../../src/webgpu/backend.ts";
import { offersTimestamps } from "./offers-timestamps.ts";

/** n seeded f32 values uniform in [-0.5, 0.5). */
const rand = (n: number, seed: number): Float32Array => randomF32(n, seed, -0.5, 0.5);

const fake = (size: number): GPUBuffer => ({ size }) as unknown as GPUBuffer;

describe("buffer pool bound", () => {
  test("give keeps a buffer only while the pooled bytes stay within min(capacity, limit()), limit asked at each give", () => {
    const ids = new Map<GPUBuffer, number>();
    let next = 1;
    const pool = new BufferPool(1000, (b) => ids.get(b) ?? (ids.set(b, next++), next - 1));
    let lim = 700;
    pool.limit = () => lim;
    expect(pool.give(fake(404))).toBe(true);
    expect(pool.give(fake(300))).toBe(false); // 704 > 700
    expect(pool.give(fake(296))).toBe(true); // exactly 700
    lim = 5000; // capacity 1000 still binds
    expect(pool.give(fake(300))).toBe(true);
    expect(pool.give(fake(4))).toBe(false); // 1004 > 1000
    expect(pool.bytes).toBe(1000);
    pool.capacity = Number.POSITIVE_INFINITY;
    expect(pool.give(fake(4000))).toBe(true);
    expect(pool.give(fake(4))).toBe(false); // 5004 > limit 5000
    expect(pool.take(296)).not.toBeNull();
    expect(pool.take(296)).toBeNull();
    expect(pool.bytes).toBe(4704);
  });

  test("default 'auto': the bound follows the high-water mark of live bytes (at least 1 GiB); a fixed number replaces it; bad values are refused", async () => {
    const g = createGPU();
    const be = await WebGpuBackend.create(g);
    const pool = (be as unknown as { batcher: { pool: BufferPool } }).batcher.pool;
    expect(pool.capacity).toBe(Number.POSITIVE_INFINITY);
    expect(pool.limit!()).toBe(MIN_AUTO_POOL_BYTES);
    const sizes = [1009, 4099, 7];
    const bufs = sizes.map((n) => be.alloc("f32", n, "activation"));
    const live = sizes.reduce((a, n) => a + 4 * n, 0);
    expect(be.stats().maxLiveBytes).toBeGreaterThanOrEqual(live);
    for (const b of bufs) be.free(b);
    await be.flush();
    expect(be.stats().pooledBytes).toBe(live);
    // the ledger's live and high-water figures, as the adaptive bound reads them
    const ledger = (be as unknown as { ledger: { liveBytes: number; maxLiveBytes: number } }).ledger;
    expect(ledger.liveBytes).toBe(0);
    ledger.maxLiveBytes = 3 * MIN_AUTO_POOL_BYTES; // as after a step of 3 GiB live
    expect(pool.limit!()).toBe(3 * MIN_AUTO_POOL_BYTES);
    be.destroy();

    const fixed = await WebGpuBackend.create(g, { bufferPoolBytes: 8192 });
    const fp = (fixed as unknown as { batcher: { pool: BufferPool } }).batcher.pool;
    expect(fp.limit).toBeNull();
    const a = fixed.alloc("f32", 1500, "activation"); // 6000 bytes
    const b = fixed.alloc("f32", 1500, "activation");
    fixed.free(a);
    fixed.free(b); // 12000 > 8192: destroyed
    await fixed.flush();
    expect(fixed.stats().pooledBytes).toBe(6000);
    expect(fixed.stats().buffersDestroyed).toBe(1);
    fixed.destroy();

    await expect(WebGpuBackend.create(g, { bufferPoolBytes: -1 })).rejects.toThrow(/bufferPoolBytes must be "auto" or a number ≥ 0, got -1/);
  });

  test("releasePooledBuffers destroys every pooled buffer: counted as destroyed, their bind groups dropped, later allocations and results unaffected", async () => {
    const be = await WebGpuBackend.create(createGPU());
    const bindGroups = (be as unknown as { batcher: { bindGroups: { size: number } } }).batcher.bindGroups;
    const n = 1013;
    const xs = rand(n, 5);
    const x = be.alloc("f32", n, "activation");
    const y = be.alloc("f32", n, "activation");
    be.write({ buf: x, off: 0 }, xs);
    be.axpy(2, { buf: x, off: 0 }, { buf: y, off: 0 }, n);
    await be.flush();
    expect(bindGroups.size).toBe(1);
    be.free(x);
    be.free(y);
    await be.flush();
    const s0 = be.stats();
    expect(s0.pooledBytes).toBe(2 * 4 * n);
    expect(be.releasePooledBuffers()).toBe(2 * 4 * n);
    const s1 = be.stats();
    expect([s1.pooledBytes, s1.buffersDestroyed - s0.buffersDestroyed]).toEqual([0, 2]);
    expect(bindGroups.size).toBe(0);
    const x2 = be.alloc("f32", n, "activation"); // fresh, not reused
    const y2 = be.alloc("f32", n, "activation");
    expect(be.stats().buffersReused).toBe(s1.buffersReused);
    be.write({ buf: x2, off: 0 }, xs);
    be.axpy(-1.5, { buf: x2, off: 0 }, { buf: y2, off: 0 }, n);
    const got = (await be.read({ buf: y2, off: 0 }, n)) as Float32Array;
    for (let j = 0; j < n; j++) expect(got[j]).toBe(Math.fround(-1.5 * xs[j]!));
    be.destroy();
  });
});

describe("submission timeline", () => {
  test("after the queue drained, early submits ramp up 4, 8, 16 … to submitAfter; none without early submits; results unchanged", async () => {
    const g = createGPU();
    if (!(await offersTimestamps(g))) return; // the ramp is observed through the timeline
    const n = 613;
    const xs = rand(n, 5);
    for (const [opts, want] of [
      [{ submitAfter: 24 }, [4, 8, 16, 24, 24, 24, 5, 0]],
      [{ submitAfter: 4 }, [...Array<number>(26).fill(4), 1, 0]],
      [{ submitAfter: 512 }, [105, 0]],
    ] as const) {
      const be = await WebGpuBackend.create(g, { timeline: true, ...opts });
      const x = be.alloc("f32", n, "other");
      const y = be.alloc("f32", n, "other");
      be.write({ buf: x, off: 0 }, xs);
      await be.flush();
      be.resetTimeline();
      for (let i = 0; i < 105; i++) be.axpy(1, { buf: x, off: 0 }, { buf: y, off: 0 }, n);
      const got = (await be.read({ buf: y, off: 0 }, n)) as Float32Array;
      for (let j = 0; j < n; j += 37) expect(Math.abs(got[j]! - 105 * xs[j]!)).toBeLessThanOrEqual(1e-4);
      // a read drains the queue: the next batch starts the ramp again
      be.axpy(1, { buf: x, off: 0 }, { buf: y, off: 0 }, n);
      await be.flush();
      const t = await be.timeline();
      expect([...t.map((b) => b.dispatches).slice(0, -1), 0]).toEqual([...want]);
      expect(t[t.length - 1]!.dispatches).toBe(1); // the ramp's first batch after the read
      be.destroy();
    }
  });

  test("timeline: true times every submitted batch (GPU end ≥ start, in order), records reasons, dispatches and cleared bytes, and leaves results unchanged", async () => {
    const g = createGPU();
    if (!(await offersTimestamps(g))) {
      await expect(WebGpuBackend.create(g, { timeline: true })).rejects.toThrow(/timestamp-query/);
      return;
    }
    const be = await WebGpuBackend.create(g, { timeline: true, submitAfter: 3 });
    const n = 997;
    const xs = rand(n, 11);
    const x = be.alloc("f32", n, "other");
    be.write({ buf: x, off: 0 }, xs);
    const tmp = be.alloc("f32", n, "other");
    be.free(tmp);
    const y = be.alloc("f32", n, "other"); // reused: cleared ahead of its batch
    for (let i = 0; i < 7; i++) be.axpy(0.5, { buf: x, off: 0 }, { buf: y, off: 0 }, n); // 7 dispatches: 3 + 3 + 1
    const got = (await be.read({ buf: y, off: 0 }, n)) as Float32Array;
    for (let j = 0; j < n; j++) expect(Math.abs(got[j]! - 3.5 * xs[j]!)).toBeLessThanOrEqual(1e-6);
    const t = await be.timeline();
    expect(t.map((b) => b.dispatches)).toEqual([3, 3, 1]);
    expect(t.map((b) => b.reason).slice(0, 3)).toEqual(["auto", "auto", "read"]);
    expect(t[0]!.clearBytes).toBe(4 * n);
    expect(t[0]!.firstLabel).toBe("axpy");
    for (let i = 0; i < t.length; i++) {
      expect(Number.isFinite(t[i]!.gpuBeginNs)).toBe(true);
      expect(t[i]!.gpuEndNs).toBeGreaterThanOrEqual(t[i]!.gpuBeginNs);
      if (i > 0) {
        expect(t[i]!.gpuBeginNs).toBeGreaterThanOrEqual(t[i - 1]!.gpuEndNs);
        expect(t[i]!.hostSubmitMs).toBeGreaterThanOrEqual(t[i - 1]!.hostSubmitMs);
      }
    }
    be.resetTimeline();
    be.affine({ buf: x, off: 0 }, { buf: y, off: 0 }, n, 2, 0);
    await be.flush();
    const t2 = await be.timeline();
    expect(t2.length).toBe(1);
    expect(t2[0]!.reason).toBe("finish");
    be.destroy();
    await expect(WebGpuBackend.create(g).then((b) => b.timeline().finally(() => b.destroy()))).rejects.toThrow(/timeline: true/);
  });
});
