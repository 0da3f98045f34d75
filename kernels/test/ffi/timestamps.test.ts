/** Timestamp queries: `timestamp-query` is checked explicitly and whichever branch applies runs. */
import { expect, test } from "bun:test";
import { createGPU } from "../../src/ffi/index.ts";

test("timestamp queries around a compute pass when the adapter offers them, else a clear refusal", async () => {
  const adapter = (await createGPU().requestAdapter())!;
  const offered = adapter.features.has("timestamp-query");
  console.log(`timestamp-query offered by ${adapter.info.device}: ${offered}`);
  if (!offered) {
    const device = await adapter.requestDevice();
    expect(device.features.has("timestamp-query")).toBe(false);
    expect(() => device.createQuerySet({ type: "timestamp", count: 2 })).toThrow(/timestamp-query/);
    device.destroy();
    return;
  }
  const device = await adapter.requestDevice({ requiredFeatures: ["timestamp-query"] });
  expect(device.features.has("timestamp-query")).toBe(true);
  const qs = device.createQuerySet({ type: "timestamp", count: 2 });
  const n = 4099;
  const buf = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.STORAGE });
  const module = device.createShaderModule({
    code: `@group(0) @binding(0) var<storage, read_write> v: array<f32>;
      @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) {
        if (g.x < arrayLength(&v)) { var s = 0.0; for (var i = 0u; i < 64u; i++) { s += sin(f32(g.x + i)); } v[g.x] = s; }
      }`,
  });
  const pipeline = device.createComputePipeline({ layout: "auto", compute: { module } });
  const bg = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
  const resolve = device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  const read = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass({ timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } });
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bg);
  pass.dispatchWorkgroups(Math.ceil(n / 64));
  pass.end();
  enc.resolveQuerySet(qs, 0, 2, resolve, 0);
  enc.copyBufferToBuffer(resolve, 0, read, 0, 16);
  device.queue.submit([enc.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const [t0, t1] = new BigUint64Array(read.getMappedRange());
  read.unmap();
  const period = (device.queue as unknown as { getTimestampPeriod(): number }).getTimestampPeriod();
  expect(period).toBeGreaterThan(0);
  expect(t0).toBeGreaterThan(0n);
  expect(t1).toBeGreaterThan(t0);
  const ns = Number(t1 - t0) * period;
  console.log(`compute pass: ${(ns / 1000).toFixed(1)} µs (timestamp period ${period} ns)`);
  expect(ns).toBeLessThan(10e9);
  qs.destroy();
  device.destroy();
});

test("a destroyed query set can be garbage-collected afterwards without aborting the process", async () => {
  const adapter = (await createGPU().requestAdapter())!;
  if (!adapter.features.has("timestamp-query")) {
    console.log(`timestamp-query not offered by ${adapter.info.device}: query sets cannot be created, nothing to collect`);
    expect(adapter.features.has("timestamp-query")).toBe(false);
    return;
  }
  const device = await adapter.requestDevice({ requiredFeatures: ["timestamp-query"] });
  for (let i = 0; i < 8; i++) {
    const qs = device.createQuerySet({ type: "timestamp", count: 2 });
    qs.destroy();
    qs.destroy(); // idempotent
  }
  Bun.gc(true);
  await Bun.sleep(10);
  Bun.gc(true);
  // the device still works after the collection
  const buf = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ, mappedAtCreation: false });
  await buf.mapAsync(GPUMapMode.READ);
  expect(new Uint8Array(buf.getMappedRange()).length).toBe(16);
  buf.unmap();
  device.destroy();
});
