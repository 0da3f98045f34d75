/** Buffers: mapAsync round trips at awkward sizes, mappedAtCreation, MAP_WRITE, detaching, errors. */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { openDevice, randomArray, readBack } from "./setup.ts";

let device: GPUDevice;
beforeAll(async () => {
  ({ device } = await openDevice());
});
afterAll(() => device.destroy());

test("writeBuffer → copy → mapAsync(READ) round trip at odd sizes and offsets", async () => {
  for (const words of [1, 3, 13, 257, 4099]) {
    const data = randomArray(words, words);
    const src = device.createBuffer({ size: words * 4, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC });
    device.queue.writeBuffer(src, 0, data);
    const got = new Float32Array(await readBack(device, src, words * 4));
    expect(got).toEqual(data);
  }
  // Partial writes: element offsets of a typed array source, byte offset in the buffer.
  const data = randomArray(29, 1);
  const dst = device.createBuffer({ size: 29 * 4, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC });
  device.queue.writeBuffer(dst, 0, new Float32Array(29));
  device.queue.writeBuffer(dst, 8, data, 3, 11); // data[3..14) → elements 2..13
  const got = new Float32Array(await readBack(device, dst, 29 * 4));
  for (let i = 0; i < 29; i++) expect(got[i]).toBe(i >= 2 && i < 13 ? data[i + 1] : 0);
});

test("mapAsync of a sub-range and getMappedRange views at an offset", async () => {
  const words = 37;
  const data = randomArray(words, 77);
  const rb = device.createBuffer({ size: words * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(rb, 0, data);
  await rb.mapAsync(GPUMapMode.READ, 8, 20 * 4);
  expect(rb.mapState).toBe("mapped");
  const view = new Float32Array(rb.getMappedRange(16, 12 * 4));
  for (let i = 0; i < 12; i++) expect(view[i]).toBe(data[4 + i]);
  expect(() => rb.getMappedRange(0, 8)).toThrow(/not inside the mapped range/);
  expect(() => rb.getMappedRange(12, 8)).toThrow(/misaligned|not inside/);
  rb.unmap();
  expect(rb.mapState).toBe("unmapped");
  // Detached after unmap: the stale view has length 0 instead of reading freed memory.
  expect(view.length).toBe(0);
});

test("mappedAtCreation and MAP_WRITE upload paths", async () => {
  const words = 211;
  const data = randomArray(words, 8);
  const a = device.createBuffer({ size: words * 4, usage: GPUBufferUsage.COPY_SRC, mappedAtCreation: true });
  expect(a.mapState).toBe("mapped");
  new Float32Array(a.getMappedRange()).set(data);
  a.unmap();
  expect(new Float32Array(await readBack(device, a, words * 4))).toEqual(data);

  const w = device.createBuffer({ size: words * 4, usage: GPUBufferUsage.MAP_WRITE | GPUBufferUsage.COPY_SRC });
  await w.mapAsync(GPUMapMode.WRITE);
  new Float32Array(w.getMappedRange()).set(data.map((v) => -v));
  w.unmap();
  const got = new Float32Array(await readBack(device, w, words * 4));
  for (let i = 0; i < words; i++) expect(got[i]).toBe(-data[i]);
  expect(() => device.createBuffer({ size: 6, usage: GPUBufferUsage.COPY_SRC, mappedAtCreation: true })).toThrow(RangeError);
});

test("mapping errors reject: double map, misalignment, missing usage, unmap while pending, destroyed", async () => {
  const b = device.createBuffer({ size: 64, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  await expect(b.mapAsync(GPUMapMode.READ, 4)).rejects.toThrow(/offset % 8/);
  const p = b.mapAsync(GPUMapMode.READ);
  expect(b.mapState).toBe("pending");
  await expect(b.mapAsync(GPUMapMode.READ)).rejects.toThrow(/is pending, expected unmapped/);
  b.unmap(); // aborts the pending map
  await expect(p).rejects.toThrow(/mapAsync/);
  expect(b.mapState).toBe("unmapped");
  await b.mapAsync(GPUMapMode.READ);
  b.unmap();

  const s = device.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE });
  device.pushErrorScope("validation");
  const bad = s.mapAsync(GPUMapMode.READ);
  await expect(bad).rejects.toThrow(/mapAsync/);
  await device.popErrorScope();

  b.destroy();
  await expect(b.mapAsync(GPUMapMode.READ)).rejects.toThrow(/destroyed/);
  b.destroy(); // idempotent
});

test("writeBuffer checks ranges and alignment before calling native code", () => {
  const b = device.createBuffer({ size: 16, usage: GPUBufferUsage.COPY_DST });
  expect(() => device.queue.writeBuffer(b, 0, new Uint8Array(3))).toThrow(/multiple of 4/);
  expect(() => device.queue.writeBuffer(b, 8, new Float32Array(4))).toThrow(/do not fit/);
  expect(() => device.queue.writeBuffer(b, 0, new Float32Array(4), 2, 3)).toThrow(/exceed/);
});

test("pollMode 'block' waits inside wgpuDevicePoll and gives the same results", async () => {
  const { createGPU } = await import("../../src/ffi/index.ts");
  const gpu = createGPU({ pollMode: "block", spinMs: 0 });
  const dev = await (await gpu.requestAdapter())!.requestDevice();
  const data = randomArray(101, 9);
  const b = dev.createBuffer({ size: 404, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  dev.queue.writeBuffer(b, 0, data);
  for (let i = 0; i < 3; i++) expect(new Float32Array(await readBack(dev, b, 404))).toEqual(data);
  await dev.queue.onSubmittedWorkDone();
  dev.destroy();
});
