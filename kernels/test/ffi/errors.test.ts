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

test("submit refuses mapped, destroyed and invalid work instead of letting wgpu-native abort", async () => {
  const { device } = await openDevice();
  const src = device.createBuffer({ size: 16, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST, label: "src" });
  const m = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: "staging" });
  await m.mapAsync(GPUMapMode.READ);
  const e1 = device.createCommandEncoder();
  e1.copyBufferToBuffer(src, 0, m, 0, 16);
  const cb1 = e1.finish();
  expect(() => device.queue.submit([cb1])).toThrow(/'staging' used by command buffer '' is mapped/);
  m.unmap();
  device.queue.submit([cb1]); // the refused buffer is still submittable once unmapped
  expect(() => device.queue.submit([cb1])).toThrow(/already submitted/);
  const e2 = device.createCommandEncoder();
  e2.clearBuffer(src);
  const cb2 = e2.finish();
  src.destroy();
  expect(() => device.queue.submit([cb2])).toThrow(/'src' used by command buffer '' is destroyed/);
  // With a listener, a failed finish yields an invalid command buffer that submit refuses.
  const seen: string[] = [];
  device.addEventListener("uncapturederror", (ev) => seen.push((ev as GPUUncapturedErrorEvent).error.message));
  const e3 = device.createCommandEncoder({ label: "bad" });
  const p3 = e3.beginComputePass();
  p3.dispatchWorkgroups(1);
  p3.end();
  const cb3 = e3.finish();
  expect(seen.length).toBe(1);
  device.queue.submit([cb3]);
  expect(seen.length).toBe(2);
  expect(seen[1]).toMatch(/is invalid/);
  // Errors of finish reach the caller even inside a user's error scope.
  device.pushErrorScope("validation");
  const e4 = device.createCommandEncoder();
  const p4 = e4.beginComputePass();
  p4.dispatchWorkgroups(1);
  p4.end();
  e4.finish();
  expect(await device.popErrorScope()).toBeNull();
  expect(seen.length).toBe(3);
  await device.queue.onSubmittedWorkDone();
  device.destroy();
  expect(() => (device as unknown as { poll(): boolean }).poll()).toThrow(GPUDeviceLostError);
});

test("debug groups and markers are accepted when balanced; an unbalanced pop is a reported error", async () => {
  const { device } = await openDevice();
  const enc = device.createCommandEncoder();
  enc.pushDebugGroup("outer ✓");
  enc.insertDebugMarker("marker");
  const pass = enc.beginComputePass();
  pass.pushDebugGroup("in pass");
  pass.insertDebugMarker("m");
  pass.popDebugGroup();
  pass.end();
  enc.popDebugGroup();
  device.queue.submit([enc.finish()]);
  const bad = device.createCommandEncoder({ label: "unbalanced" });
  bad.popDebugGroup();
  expect(() => bad.finish()).toThrow(GPUUncapturedError);
  await device.queue.onSubmittedWorkDone();
  device.destroy();
});
