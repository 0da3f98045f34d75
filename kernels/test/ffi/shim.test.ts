/** The by-value ABI bridge (kernels/src/ffi/shim.c compiled by bun:ffi cc) and library lookup. */
import { expect, test } from "bun:test";
import { ptr } from "bun:ffi";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { libraryKind, loadNative, slotMessage } from "../../src/ffi/native.ts";
import { WGPU_NATIVE_VERSION, ZM_WGPU_VERSION } from "../../src/ffi/library.ts";
import { createGPU, libraryVersion, resolveLibrary, WgpuLibraryNotFoundError } from "../../src/ffi/index.ts";

test("shim passes a WGPUStringView built in C by value", () => {
  const n = loadNative();
  const text = new TextEncoder().encode("zeromoe by value");
  // zm_abi_selftest returns length + first byte, read on the far side of a by-value call.
  expect(n.shim.zm_abi_selftest(ptr(text), 13)).toBe(13 + text[0]);
  const one = new TextEncoder().encode("A");
  expect(n.shim.zm_abi_selftest(ptr(one), 1)).toBe(1 + 65);
});

test("a C callback receiving WGPUStringView by value fills a slot that JS reads back", () => {
  const n = loadNative();
  const slot = n.shim.zm_slot_new()!;
  const msg = new TextEncoder().encode("mapped: ok ✓");
  expect(n.shim.zm_slot_done(slot)).toBe(0);
  n.shim.zm_abi_callback_selftest(slot, 7, ptr(msg), msg.length);
  expect(n.shim.zm_slot_done(slot)).toBe(1);
  expect(n.shim.zm_slot_status(slot)).toBe(7);
  expect(slotMessage(n, slot)).toBe("mapped: ok ✓");
  n.shim.zm_slot_free(slot);
});

test("limit names come from webgpu.h's WGPULimits through the shim", () => {
  const n = loadNative();
  const count = n.shim.zm_limit_count();
  expect(count).toBeGreaterThan(30);
  const names = Array.from({ length: count }, (_, i) => String(n.shim.zm_limit_name(i)));
  expect(names).toContain("maxStorageBufferBindingSize");
  expect(names).toContain("maxComputeWorkgroupsPerDimension");
  expect(n.shim.zm_limit_bits(names.indexOf("maxBufferSize"))).toBe(64);
  expect(n.shim.zm_limit_bits(names.indexOf("maxComputeWorkgroupSizeX"))).toBe(32);
});

test("libraryVersion reports wgpu-native 29.0.1.1 (or 30.0.2.0 for our native/wgpu-coop library)", () => {
  expect(libraryVersion()).toBe(libraryKind(loadNative()) === "zm-wgpu" ? ZM_WGPU_VERSION : WGPU_NATIVE_VERSION);
});

test("a missing library is a clear error naming the paths tried and scripts/setup.sh", () => {
  const missing = join(mkdtempSync(join(tmpdir(), "zm-nolib-")), "libwgpu_native.so");
  let err: unknown;
  try {
    createGPU({ libraryPath: missing });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(WgpuLibraryNotFoundError);
  expect((err as Error).message).toContain(missing);
  expect((err as Error).message).toContain("bash scripts/setup.sh");
  expect((err as WgpuLibraryNotFoundError).tried).toEqual([missing]);
});

test("WGPU_NATIVE_LIB overrides the default path", () => {
  const saved = process.env.WGPU_NATIVE_LIB;
  try {
    process.env.WGPU_NATIVE_LIB = "/nonexistent/zm/libwgpu_native.so";
    expect(() => resolveLibrary()).toThrow(/\/nonexistent\/zm\/libwgpu_native.so/);
  } finally {
    if (saved === undefined) delete process.env.WGPU_NATIVE_LIB;
    else process.env.WGPU_NATIVE_LIB = saved;
  }
});
