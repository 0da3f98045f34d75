/** kernels/src/report.ts and `bun run report` (core/src/cli/report.ts). */
import { afterEach, expect, test } from "bun:test";
import { join } from "node:path";
import { collectReport, formatReport, REPORT_LIMITS, setAutoChoiceProvider } from "../../src/report.ts";
import { libraryKind, loadNative } from "../../src/ffi/native.ts";
import { WGPU_NATIVE_VERSION, ZM_WGPU_VERSION } from "../../src/ffi/library.ts";

/** The version the selected library must report: prebuilt wgpu-native, or our native/wgpu-coop. */
const expectedVersion = () => (libraryKind(loadNative()) === "zm-wgpu" ? ZM_WGPU_VERSION : WGPU_NATIVE_VERSION);

afterEach(() => setAutoChoiceProvider(null));

test("collectReport lists Bun, wgpu-native and every adapter with key limits and a passing compute check", async () => {
  const r = await collectReport();
  expect(r.bunVersion).toBe(Bun.version);
  expect(r.wgpuNativeVersion).toBe(expectedVersion());
  expect(r.wgpuLibraryKind).toBe(libraryKind(loadNative()));
  // our library lists the driver's cooperative-matrix configurations (maybe none); wgpu-native cannot
  for (const a of r.adapters) expect(a.cooperativeMatrix === null).toBe(r.wgpuLibraryKind === "wgpu-native");
  expect(r.wgpuError).toBeNull();
  expect(r.adapters.length).toBeGreaterThan(0);
  for (const a of r.adapters) {
    for (const k of REPORT_LIMITS) expect(a.limits[k]).toBeGreaterThan(0);
    expect(a.backend.length).toBeGreaterThan(0);
    expect(a.features.length).toBeGreaterThan(0);
  }
  const vulkan = r.adapters.find((a) => a.backend === "vulkan");
  expect(vulkan?.check?.ok).toBe(true);
  const text = formatReport(r);
  expect(text).toContain("wgpu-native......");
  expect(text).toContain("maxStorageBufferBindingSize");
  expect(text).toContain("compute check");
  expect(text).toMatch(/backend auto\.+ /);
  // kernels/src/select.ts decides `auto`; when it is importable the report names its choice.
  if (r.auto) expect(["webgpu", "cpu"]).toContain(r.auto.backend);
  else expect(r.autoNote).toMatch(/select\.ts|selection failed/);
});

test("a missing wgpu-native is reported, not thrown", async () => {
  const r = await collectReport({ libraryPath: "/nonexistent/libwgpu_native.so", probe: false });
  expect(r.wgpuNativeVersion).toBeNull();
  expect(r.adapters).toEqual([]);
  expect(r.wgpuError).toContain("bash scripts/setup.sh");
  expect(formatReport(r)).toContain("wgpu-native......................... not available");
});

test("the backend-auto line comes from the installed provider", async () => {
  setAutoChoiceProvider(async () => ({ backend: "cpu", reason: "test provider says so" }));
  const r = await collectReport({ probe: false });
  expect(r.auto).toEqual({ backend: "cpu", reason: "test provider says so" });
  expect(formatReport(r)).toContain("cpu: test provider says so");
});

test("bun run report --json --no-probe prints parseable JSON", async () => {
  const cli = join(import.meta.dir, "..", "..", "..", "core", "src", "cli", "report.ts");
  const p = Bun.spawn(["bun", cli, "--json", "--no-probe"], { stdout: "pipe", stderr: "pipe" });
  const out = await new Response(p.stdout).text();
  expect(await p.exited).toBe(0);
  const r = JSON.parse(out);
  expect(r.wgpuNativeVersion).toBe(expectedVersion());
  expect(r.adapters[0].check).toBeNull();
  const bad = Bun.spawn(["bun", cli, "--bogus"], { stdout: "pipe", stderr: "pipe" });
  expect(await bad.exited).toBe(2);
  expect(await new Response(bad.stderr).text()).toContain("usage: bun run report");
});
