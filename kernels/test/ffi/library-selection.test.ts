/** Library selection (kernels/src/ffi/library.ts): env ZEROMOE_WGPU picks the prebuilt wgpu-native
 * (default, "native") or our native/wgpu-coop build ("coop"); WGPU_NATIVE_LIB still wins; a bad
 * value is refused naming the variable. */
import { afterEach, expect, test } from "bun:test";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { coopLibraryBuildPath, coopLibraryCachePath, resolveLibrary, WgpuLibraryNotFoundError, WgpuSelectionError, wgpuSelection } from "../../src/ffi/library.ts";

const saved = { sel: process.env.ZEROMOE_WGPU, lib: process.env.WGPU_NATIVE_LIB, cache: process.env.ZEROMOE_CACHE };
afterEach(() => {
  for (const [k, v] of [["ZEROMOE_WGPU", saved.sel], ["WGPU_NATIVE_LIB", saved.lib], ["ZEROMOE_CACHE", saved.cache]] as const) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

test("ZEROMOE_WGPU: unset/native/coop accepted, anything else refused naming the variable", () => {
  delete process.env.ZEROMOE_WGPU;
  expect(wgpuSelection()).toBe("native");
  process.env.ZEROMOE_WGPU = "native";
  expect(wgpuSelection()).toBe("native");
  process.env.ZEROMOE_WGPU = "coop";
  expect(wgpuSelection()).toBe("coop");
  process.env.ZEROMOE_WGPU = "tensor";
  expect(() => wgpuSelection()).toThrow(WgpuSelectionError);
  expect(() => wgpuSelection()).toThrow(/ZEROMOE_WGPU="tensor".*"native".*"coop"/);
  delete process.env.WGPU_NATIVE_LIB;
  expect(() => resolveLibrary()).toThrow(WgpuSelectionError);
});

test("coop: the checkout's build, then the set-up cache; reported as selected by ZEROMOE_WGPU=coop", () => {
  delete process.env.WGPU_NATIVE_LIB;
  process.env.ZEROMOE_WGPU = "coop";
  process.env.ZEROMOE_CACHE = mkdtempSync(join(tmpdir(), "zm-sel-"));
  expect(coopLibraryCachePath()).toBe(join(process.env.ZEROMOE_CACHE, "zm-wgpu", "libzm_wgpu.so"));
  if (existsSync(coopLibraryBuildPath())) {
    // headers come from the wgpu-native cache folder: use the real one
    if (saved.cache === undefined) delete process.env.ZEROMOE_CACHE;
    else process.env.ZEROMOE_CACHE = saved.cache;
    const loc = resolveLibrary();
    expect(loc.libraryPath).toBe(coopLibraryBuildPath());
    expect(loc.selectedBy).toBe("ZEROMOE_WGPU=coop");
  } else {
    let err: unknown;
    try {
      resolveLibrary();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WgpuLibraryNotFoundError);
    expect((err as WgpuLibraryNotFoundError).tried).toEqual([coopLibraryBuildPath(), coopLibraryCachePath()]);
    expect((err as Error).message).toContain("ZEROMOE_WITH_COOP=1 bash scripts/setup.sh");
  }
});

test("WGPU_NATIVE_LIB wins over ZEROMOE_WGPU and is the only path tried", () => {
  process.env.ZEROMOE_WGPU = "coop";
  process.env.WGPU_NATIVE_LIB = "/nonexistent/zm/libzm_wgpu.so";
  expect(() => resolveLibrary()).toThrow(/\/nonexistent\/zm\/libzm_wgpu.so/);
});
