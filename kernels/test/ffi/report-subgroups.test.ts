/** The report's subgroup line (kernels/src/report.ts): wgpu-native 29 lists subgroups as its native
 * feature "wgpu-subgroup", not the standard "subgroups"; both count, and the sizes are shown. */
import { expect, test } from "bun:test";
import { type AdapterReport, collectReport, formatReport, type Report, subgroupFeature } from "../../src/report.ts";

function adapter(features: string[], subgroupSizes: AdapterReport["subgroupSizes"]): AdapterReport {
  const a = {
    index: 0, name: "test adapter", vendor: "v", architecture: "a", driver: "d", backend: "vulkan", type: "discrete-gpu",
    features, limits: {} as AdapterReport["limits"], check: null, cooperativeMatrix: null, subgroupSizes,
  };
  return a as AdapterReport;
}

function reportOf(adapters: AdapterReport[]): Report {
  return {
    bunVersion: Bun.version, platform: "p", cpu: "c", cpuCount: 1, memoryBytes: 1, wgpuNativeVersion: null, wgpuNativeLibrary: null,
    wgpuLibraryKind: null, wgpuLibrarySelectedBy: null, wgpuError: null, adapters, auto: null, autoNote: null,
  } as Report;
}

test("either feature name counts as subgroups; the standard name wins when both are listed", () => {
  expect(subgroupFeature(["shader-f16", "wgpu-subgroup"])).toBe("wgpu-subgroup");
  expect(subgroupFeature(["subgroups"])).toBe("subgroups");
  expect(subgroupFeature(["wgpu-subgroup", "subgroups"])).toBe("subgroups");
  expect(subgroupFeature(["wgpu-subgroup-barrier", "shader-f16"])).toBeNull();
});

test("the key-features line says yes with the feature name and sizes, or no", () => {
  const text = formatReport(reportOf([adapter(["wgpu-subgroup", "timestamp-query"], { min: 32, max: 32 }), adapter(["shader-f16"], null), adapter(["subgroups"], { min: 4, max: 64 })]));
  const lines = text.split("\n").filter((l) => l.includes("key features"));
  expect(lines[0]).toContain("subgroups yes (wgpu-subgroup, size 32)");
  expect(lines[0]).toContain("timestamp-query yes");
  expect(lines[1]).toContain("subgroups no");
  expect(lines[2]).toContain("subgroups yes (subgroups, size 4–64)");
});

test("collectReport: an adapter listing wgpu-subgroup is reported with subgroups", async () => {
  const r = await collectReport({ probe: false });
  for (const a of r.adapters) {
    if (a.subgroupSizes) expect(subgroupFeature(a.features)).not.toBeNull();
    if (subgroupFeature(a.features)) expect(formatReport(reportOf([a]))).toContain(`subgroups yes (${subgroupFeature(a.features)}`);
  }
});
