/** Adapters: enumeration, choice by power preference or index, info, features, limits, devices. */
import { expect, test } from "bun:test";
import { createGPU, enumerateAdapters, type AdapterInfoEx } from "../../src/ffi/index.ts";

test("enumerateAdapters lists adapters with name, type and backend", async () => {
  const adapters = await enumerateAdapters();
  expect(adapters.length).toBeGreaterThan(0);
  for (const [i, a] of adapters.entries()) {
    const info = a.info as AdapterInfoEx;
    console.log(`adapter ${i}: ${info.device || info.description} | type ${info.adapterType} | backend ${info.backendType} | vendor ${info.vendor} | driver ${info.description}`);
    expect(["vulkan", "metal", "d3d12", "d3d11", "opengl", "opengles", "webgpu", "null"]).toContain(info.backendType);
    expect(["discrete-gpu", "integrated-gpu", "cpu", "unknown"]).toContain(info.adapterType);
    expect(typeof info.vendor).toBe("string");
    expect(typeof info.architecture).toBe("string");
    expect(info.device.length + info.description.length).toBeGreaterThan(0);
  }
});

test("requestAdapter by power preference and by index; limits and features are readable", async () => {
  const gpu = createGPU();
  const hp = await gpu.requestAdapter({ powerPreference: "high-performance" });
  expect(hp).not.toBeNull();
  const lp = await gpu.requestAdapter({ powerPreference: "low-power" });
  expect(lp).not.toBeNull();
  const byIndex = await gpu.requestAdapter({ adapterIndex: 0 } as GPURequestAdapterOptions);
  expect(byIndex).not.toBeNull();
  await expect(gpu.requestAdapter({ adapterIndex: 999 } as GPURequestAdapterOptions)).rejects.toThrow(/adapterIndex 999 out of range/);
  const l = hp!.limits;
  expect(l.maxComputeWorkgroupsPerDimension).toBeGreaterThanOrEqual(65535);
  expect(l.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 * 1024 * 1024);
  expect(l.maxBufferSize).toBeGreaterThanOrEqual(256 * 1024 * 1024);
  expect(l.maxComputeInvocationsPerWorkgroup).toBeGreaterThanOrEqual(256);
  expect(l.maxComputeWorkgroupStorageSize).toBeGreaterThanOrEqual(16384);
  for (const f of hp!.features) expect(typeof f).toBe("string");
  expect(() => gpu.getPreferredCanvasFormat()).toThrow(/no canvas/);
});

test("requestDevice lifts limits to the adapter's maxima and enables offered features", async () => {
  const gpu = createGPU();
  const adapter = (await gpu.requestAdapter())!;
  const want: GPUFeatureName[] = (["shader-f16", "timestamp-query", "subgroups"] as GPUFeatureName[]).filter((f) => adapter.features.has(f));
  const device = await adapter.requestDevice({
    requiredFeatures: want,
    requiredLimits: {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
    },
  });
  expect(device.limits.maxStorageBufferBindingSize).toBe(adapter.limits.maxStorageBufferBindingSize);
  expect(device.limits.maxBufferSize).toBe(adapter.limits.maxBufferSize);
  for (const f of want) expect(device.features.has(f)).toBe(true);
  device.destroy();
  // Every adapter limit at once (the spread of adapter.limits) is a valid request.
  const all = await adapter.requestDevice({ requiredLimits: { ...adapter.limits } as unknown as Record<string, number> });
  expect(all.limits.maxComputeWorkgroupStorageSize).toBe(adapter.limits.maxComputeWorkgroupStorageSize);
  all.destroy();
  // A default device keeps the spec's default storage-binding limit (128 MiB).
  const plain = await adapter.requestDevice();
  expect(plain.limits.maxStorageBufferBindingSize).toBe(128 * 1024 * 1024);
  plain.destroy();
});

test("requestDevice refuses limits beyond the adapter and features it lacks", async () => {
  const adapter = (await createGPU().requestAdapter())!;
  await expect(adapter.requestDevice({ requiredLimits: { maxBufferSize: adapter.limits.maxBufferSize + 1 } })).rejects.toThrow(/exceeds the adapter/);
  await expect(adapter.requestDevice({ requiredLimits: { maxBogus: 1 } })).rejects.toThrow(/not a known limit/);
  await expect(adapter.requestDevice({ requiredFeatures: ["no-such-feature" as GPUFeatureName] })).rejects.toThrow(TypeError);
});

test("adapters and devices outlive the GPU object that made them (garbage collection)", async () => {
  let adapter: GPUAdapter | null = await createGPU().requestAdapter();
  Bun.gc(true);
  await new Promise((r) => setTimeout(r, 10));
  Bun.gc(true);
  const device = await adapter!.requestDevice();
  adapter = null;
  Bun.gc(true);
  const b = device.createBuffer({ size: 8, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(b, 0, new Uint32Array([3, 5]));
  await b.mapAsync(GPUMapMode.READ);
  expect(Array.from(new Uint32Array(b.getMappedRange()))).toEqual([3, 5]);
  b.unmap();
  device.destroy();
});
