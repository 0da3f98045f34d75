/** Compute: WGSL dispatch and read-back against JavaScript references. */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { openDevice, randomArray, readBack } from "./setup.ts";

let device: GPUDevice;
beforeAll(async () => {
  ({ device } = await openDevice());
});
afterAll(() => device.destroy());

const SAXPY = /* wgsl */ `
override alpha: f32 = 1.0;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < arrayLength(&y)) { y[g.x] = alpha * x[g.x] + y[g.x]; }
}`;

function storage(data: Float32Array, extra = 0): GPUBuffer {
  const b = device.createBuffer({ size: data.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC | extra });
  device.queue.writeBuffer(b, 0, data);
  return b;
}

test("saxpy over a prime-length random array (auto layout, override constant) matches JS", async () => {
  for (const n of [1, 7, 1009]) {
    const x = randomArray(n, 11 + n);
    const y = randomArray(n, 23 + n);
    const bx = storage(x);
    const by = storage(y);
    const module = device.createShaderModule({ code: SAXPY, label: "saxpy" });
    const pipeline = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main", constants: { alpha: -1.75 } } });
    const bg = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: bx } }, { binding: 1, resource: { buffer: by } }] });
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bg);
    pass.dispatchWorkgroups(Math.ceil(n / 64));
    pass.end();
    device.queue.submit([enc.finish()]);
    const out = new Float32Array(await readBack(device, by, n * 4));
    for (let i = 0; i < n; i++) expect(Math.abs(out[i] - Math.fround(Math.fround(-1.75 * x[i]) + y[i]))).toBeLessThanOrEqual(1e-6);
  }
});

test("explicit bind group layout + pipeline layout, async pipeline, uniform parameters", async () => {
  const n = 523;
  const code = /* wgsl */ `
struct P { scale: f32, shift: f32, n: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(1) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(32)
fn run(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < p.n) { out[g.x] = exp(a[g.x]) * p.scale + p.shift; }
}`;
  const bgl0 = device.createBindGroupLayout({
    entries: [
      { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: "uniform" } },
      { binding: 1, visibility: GPUShaderStage.COMPUTE, buffer: { type: "read-only-storage" } },
    ],
  });
  const bgl1 = device.createBindGroupLayout({ entries: [{ binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: "storage" } }] });
  const layout = device.createPipelineLayout({ bindGroupLayouts: [bgl0, bgl1] });
  const pipeline = await device.createComputePipelineAsync({ layout, compute: { module: device.createShaderModule({ code }), entryPoint: "run" } });
  const a = randomArray(n, 5);
  const params = new ArrayBuffer(16);
  new Float32Array(params, 0, 2).set([0.5, -2]);
  new Uint32Array(params, 8, 1)[0] = n;
  const ub = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(ub, 0, params);
  const ba = storage(a);
  const bo = storage(new Float32Array(n).fill(Number.NaN));
  const enc = device.createCommandEncoder({ label: "explicit" });
  const pass = enc.beginComputePass({ label: "explicit-pass" });
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, device.createBindGroup({ layout: bgl0, entries: [{ binding: 0, resource: { buffer: ub } }, { binding: 1, resource: { buffer: ba } }] }));
  pass.setBindGroup(1, device.createBindGroup({ layout: bgl1, entries: [{ binding: 0, resource: { buffer: bo } }] }));
  pass.dispatchWorkgroups(Math.ceil(n / 32));
  pass.end();
  device.queue.submit([enc.finish()]);
  const out = new Float32Array(await readBack(device, bo, n * 4));
  for (let i = 0; i < n; i++) expect(Math.abs(out[i] - (Math.exp(a[i]) * 0.5 - 2))).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(out[i])));
});

test("many dispatches in one encoder accumulate in order; indirect dispatch; clear and copy", async () => {
  const n = 331;
  const code = /* wgsl */ `
@group(0) @binding(0) var<storage, read_write> acc: array<f32>;
@group(0) @binding(1) var<storage, read> inc: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < arrayLength(&acc)) { acc[g.x] = acc[g.x] * 0.5 + inc[g.x]; }
}`;
  const pipeline = device.createComputePipeline({ layout: "auto", compute: { module: device.createShaderModule({ code }) } });
  const acc0 = randomArray(n, 99);
  const inc = randomArray(n, 100);
  const bacc = storage(acc0);
  const binc = storage(inc);
  const bg = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: bacc } }, { binding: 1, resource: { buffer: binc } }] });
  const indirect = device.createBuffer({ size: 12, usage: GPUBufferUsage.INDIRECT | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(indirect, 0, new Uint32Array([Math.ceil(n / 64), 1, 1]));
  const steps = 200;
  const enc = device.createCommandEncoder();
  for (let s = 0; s < steps; s++) {
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bg);
    if (s % 2 === 0) pass.dispatchWorkgroups(Math.ceil(n / 64));
    else pass.dispatchWorkgroupsIndirect(indirect, 0);
    pass.end();
  }
  const copy = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC });
  enc.copyBufferToBuffer(bacc, 0, copy, 0, n * 4);
  enc.clearBuffer(bacc, 4, 8); // zero elements 1 and 2
  device.queue.submit([enc.finish()]);
  await device.queue.onSubmittedWorkDone();
  const ref = Float32Array.from(acc0);
  for (let s = 0; s < steps; s++) for (let i = 0; i < n; i++) ref[i] = Math.fround(Math.fround(ref[i] * 0.5) + inc[i]);
  const got = new Float32Array(await readBack(device, copy, n * 4));
  for (let i = 0; i < n; i++) expect(Math.abs(got[i] - ref[i])).toBeLessThanOrEqual(1e-6);
  const cleared = new Float32Array(await readBack(device, bacc, n * 4));
  expect(cleared[0]).toBe(got[0]);
  expect(cleared[1]).toBe(0);
  expect(cleared[2]).toBe(0);
  expect(cleared[3]).toBe(got[3]);
});

test("several command buffers in one submit run in order", async () => {
  const n = 97;
  const b = storage(randomArray(n, 3));
  const c = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC });
  const e1 = device.createCommandEncoder();
  e1.clearBuffer(b);
  const e2 = device.createCommandEncoder();
  e2.copyBufferToBuffer(b, c); // the (source, destination, size?) overload
  device.queue.submit([e1.finish(), e2.finish()]);
  const got = new Float32Array(await readBack(device, c, n * 4));
  expect(Array.from(got).every((v) => v === 0)).toBe(true);
});

test("non-standard immediates (wgpu-immediates): per-dispatch parameters without a uniform buffer", async () => {
  const { createGPU } = await import("../../src/ffi/index.ts");
  const adapter = (await createGPU().requestAdapter())!;
  const offered = adapter.features.has("wgpu-immediates");
  if (!offered) {
    await expect(adapter.requestDevice({ requiredFeatures: ["wgpu-immediates" as GPUFeatureName] })).rejects.toThrow(TypeError);
    return;
  }
  const dev = await adapter.requestDevice({ requiredFeatures: ["wgpu-immediates" as GPUFeatureName], requiredLimits: { maxImmediateSize: 16 } as Record<string, number> });
  const code = /* wgsl */ `
struct P { scale: f32, n: u32 }
var<immediate> p: P;
@group(0) @binding(0) var<storage, read_write> v: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) { if (g.x < p.n) { v[g.x] = v[g.x] * p.scale; } }`;
  const bgl = dev.createBindGroupLayout({ entries: [{ binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: "storage" } }] });
  const layout = dev.createPipelineLayout({ bindGroupLayouts: [bgl], immediateSize: 8 } as GPUPipelineLayoutDescriptor);
  const pipeline = dev.createComputePipeline({ layout, compute: { module: dev.createShaderModule({ code }) } });
  const n = 67;
  const x = randomArray(n, 41);
  const b = dev.createBuffer({ size: n * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  dev.queue.writeBuffer(b, 0, x);
  const enc = dev.createCommandEncoder();
  const pass = enc.beginComputePass() as unknown as GPUComputePassEncoder & { setImmediates(offset: number, data: ArrayBufferView): void };
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, dev.createBindGroup({ layout: bgl, entries: [{ binding: 0, resource: { buffer: b } }] }));
  const imm = new ArrayBuffer(8);
  const view = new DataView(imm);
  for (const [scale, count] of [[3, n], [-0.5, 13]] as const) {
    view.setFloat32(0, scale, true);
    view.setUint32(4, count, true);
    pass.setImmediates(0, new Uint8Array(imm));
    pass.dispatchWorkgroups(Math.ceil(n / 64));
  }
  pass.end();
  dev.queue.submit([enc.finish()]);
  const got = new Float32Array(await readBack(dev, b, n * 4));
  for (let i = 0; i < n; i++) expect(got[i]).toBe(Math.fround(Math.fround(x[i] * 3) * (i < 13 ? -0.5 : 1)));
  expect(() => pass.setImmediates(2, new Uint8Array(4))).toThrow(/multiples of 4|ended/);
  dev.destroy();
});
