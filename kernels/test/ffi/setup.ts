/** Shared test set-up for kernels/test/ffi (one GPU, adapter and device per test file), also used by
 * the webgpu tests that drive a raw GPUDevice (matmul-coop*.test.ts). */
import { createGPU } from "../../src/ffi/index.ts";

/** Seeded pseudo-random numbers in [-1, 1) (mulberry32), so failures reproduce. */
export function randomArray(n: number, seed: number): Float32Array<ArrayBuffer> {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = (((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1;
  }
  return out;
}

/** A GPU, its high-performance adapter and a device with the adapter's buffer limits. */
export async function openDevice(features: GPUFeatureName[] = []): Promise<{ gpu: GPU; adapter: GPUAdapter; device: GPUDevice }> {
  const gpu = createGPU();
  const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) throw new Error("no WebGPU adapter: kernels/test/ffi needs a Vulkan driver (lavapipe in CI)");
  const device = await adapter.requestDevice({
    requiredFeatures: features,
    requiredLimits: {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
    },
  });
  return { gpu, adapter, device };
}

/** A new buffer holding `data`, zero-padded to a multiple of 4 bytes (at least 4), with `usage` |
 * COPY_DST (writeBuffer needs 4-byte sizes; f16 arrays of odd length are not). */
export function uploadPadded(device: GPUDevice, data: ArrayBufferView, usage: number): GPUBuffer {
  const bytes = new Uint8Array(Math.ceil(data.byteLength / 4) * 4 || 4);
  bytes.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  const buf = device.createBuffer({ size: bytes.byteLength, usage: usage | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(buf, 0, bytes.buffer, 0, bytes.byteLength);
  return buf;
}

/** Copy `size` bytes of `src` into a fresh MAP_READ buffer and return them. */
export async function readBack(device: GPUDevice, src: GPUBuffer, size: number): Promise<ArrayBuffer> {
  const rb = device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(src, 0, rb, 0, size);
  device.queue.submit([enc.finish()]);
  await rb.mapAsync(GPUMapMode.READ);
  const out = rb.getMappedRange().slice(0);
  rb.unmap();
  rb.destroy();
  return out;
}
