/** Errors: WGSL compile errors, uncaptured errors, error scopes, pipeline errors, device loss. */
import { expect, test } from "bun:test";
import { GPUDeviceLostError, GPUShaderCompilationError, GPUUncapturedError } from "../../src/ffi/index.ts";
import { openDevice } from "./setup.ts";

test("a WGSL compile error throws with the compiler message and line:column", async () => {
  const { device } = await openDevice();
  const code = "@compute @workgroup_size(1)\nfn main() {\n  let x: f32 = 1.0 +;\n}\n";
  let err: unknown;
  try {
    device.createShaderModule({ code, label: "broken" });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(GPUShaderCompilationError);
  const e = err as GPUShaderCompilationError;
  expect(e.lineNum).toBe(3);
  expect(e.linePos).toBe(21);
  expect(e.message).toContain("expected expression");
  expect(e.message).toContain("broken");
  expect(e.message).toContain("line 3:21");
  // A type error (validation, not parsing) carries the span of the invalid function (line 2) and
  // the compiler's annotated source with the offending line.
  try {
    device.createShaderModule({ code: "const k = 1;\nfn f() -> f32 {\n  return 1u;\n}\n" });
    throw new Error("should have thrown");
  } catch (e2) {
    expect(e2).toBeInstanceOf(GPUShaderCompilationError);
    expect((e2 as GPUShaderCompilationError).lineNum).toBe(2);
    expect((e2 as Error).message).toContain("return 1u;");
  }
  const ok = device.createShaderModule({ code: "@compute @workgroup_size(1) fn main() {}" });
  expect((await ok.getCompilationInfo()).messages.length).toBe(0);
  device.destroy();
});

test("an uncaptured validation error becomes an exception naming the operation", async () => {
  const { device } = await openDevice();
  expect(() => device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.STORAGE })).toThrow(GPUUncapturedError);
  const enc = device.createCommandEncoder({ label: "no-pipeline" });
  const pass = enc.beginComputePass();
  pass.dispatchWorkgroups(1);
  pass.end();
  let err: unknown;
  try {
    enc.finish();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(GPUUncapturedError);
  expect((err as Error).message).toContain("no-pipeline");
  expect((err as Error).message).toMatch(/pipeline must be set/i);
  expect((err as GPUUncapturedError).error.constructor.name).toBe("GPUValidationErrorImpl");
  // The encoder's handle is gone after finish: reuse is a JS error, not a native crash.
  expect(() => enc.beginComputePass()).toThrow(/finished/);
  expect(() => pass.dispatchWorkgroups(1)).toThrow(/ended/);
  device.destroy();
});

test("with an uncapturederror listener errors are dispatched as events instead", async () => {
  const { device } = await openDevice();
  const seen: string[] = [];
  const listener = (ev: Event) => seen.push((ev as GPUUncapturedErrorEvent).error.message);
  device.addEventListener("uncapturederror", listener);
  device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_WRITE | GPUBufferUsage.STORAGE });
  expect(seen.length).toBe(1);
  expect(seen[0]).toMatch(/MAP/);
  device.removeEventListener("uncapturederror", listener);
  expect(() => device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_WRITE | GPUBufferUsage.STORAGE })).toThrow(GPUUncapturedError);
  device.destroy();
});

test("error scopes capture errors (nested, filtered), and popErrorScope on empty stack rejects", async () => {
  const { device } = await openDevice();
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.UNIFORM });
  const inner = await device.popErrorScope();
  const outer = await device.popErrorScope();
  expect(inner).not.toBeNull();
  expect(inner!.message).toMatch(/MAP/);
  expect(outer).toBeNull();
  device.pushErrorScope("validation");
  device.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE });
  expect(await device.popErrorScope()).toBeNull();
  await expect(device.popErrorScope()).rejects.toThrow(/popErrorScope/);
  expect(() => device.pushErrorScope("internal")).toThrow(/not supported by wgpu-native/);
  device.destroy();
});

test("createComputePipelineAsync rejects with a GPUPipelineError for a bad entry point", async () => {
  const { device } = await openDevice();
  const module = device.createShaderModule({ code: "@compute @workgroup_size(1) fn main() {}" });
  const p = device.createComputePipelineAsync({ layout: "auto", compute: { module, entryPoint: "nope" } });
  await expect(p).rejects.toMatchObject({ name: "GPUPipelineError", reason: "validation" });
  device.destroy();
});

test("device.destroy resolves lost, rejects pending work and makes calls throw", async () => {
  const { device } = await openDevice();
  const b = device.createBuffer({ size: 64, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  device.destroy();
  const info = await device.lost;
  expect(info.reason).toBe("destroyed");
  await expect(b.mapAsync(GPUMapMode.READ)).rejects.toThrow(GPUDeviceLostError);
  expect(() => device.createBuffer({ size: 4, usage: GPUBufferUsage.COPY_DST })).toThrow(GPUDeviceLostError);
  await expect(device.queue.onSubmittedWorkDone()).rejects.toThrow(GPUDeviceLostError);
  b.destroy(); // destroying after loss is allowed
  device.destroy(); // idempotent
});
