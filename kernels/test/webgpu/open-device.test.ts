/**
 * openDevice's feature negotiation, on a fake GPU (no adapter needed): an adapter that lists
 * wgpu-cooperative-matrix but whose library refuses experimental features (the prebuilt
 * wgpu-native on the H200) still yields a device, without that feature; other failures are still
 * reported with the features asked for.
 */
import { describe, expect, test } from "bun:test";
import { openDevice } from "../../src/webgpu/device.ts";

function fakeGpu(listed: string[], refuse: (features: string[]) => string | null): { gpu: GPU; asked: string[][] } {
  const asked: string[][] = [];
  const adapter = {
    limits: { maxBufferSize: 1 << 30 },
    features: new Set(listed),
    info: { vendor: "fake", architecture: "", device: "Fake GPU", description: "fake" },
    async requestDevice(desc: { requiredFeatures: string[] }) {
      asked.push([...desc.requiredFeatures]);
      const why = refuse(desc.requiredFeatures);
      if (why) throw new Error(why);
      return { features: new Set(desc.requiredFeatures) };
    },
  };
  const gpu = { requestAdapter: async () => adapter } as unknown as GPU;
  return { gpu, asked };
}

describe("openDevice feature negotiation", () => {
  test("a listed experimental feature the library refuses is dropped and the device opens", async () => {
    const { gpu, asked } = fakeGpu(["shader-f16", "timestamp-query", "wgpu-cooperative-matrix"], (f) =>
      f.includes("wgpu-cooperative-matrix") ? "Some experimental features, EXPERIMENTAL_COOPERATIVE_MATRIX, were requested, but experimental features are not enabled" : null,
    );
    const opened = await openDevice(gpu);
    expect(asked).toEqual([
      ["shader-f16", "timestamp-query", "wgpu-cooperative-matrix"],
      ["shader-f16", "timestamp-query"],
    ]);
    expect(opened.info.features).toEqual(["shader-f16", "timestamp-query"]);
  });

  test("a library that enables it keeps it (one request)", async () => {
    const { gpu, asked } = fakeGpu(["shader-f16", "wgpu-cooperative-matrix"], () => null);
    const opened = await openDevice(gpu);
    expect(asked.length).toBe(1);
    expect(opened.info.features).toContain("wgpu-cooperative-matrix");
  });

  test("a refusal without experimental features asked is reported at once, naming them", async () => {
    const { gpu, asked } = fakeGpu(["shader-f16"], () => "out of memory");
    await expect(openDevice(gpu)).rejects.toThrow(/requestDevice failed .*features \[shader-f16\]: out of memory/);
    expect(asked.length).toBe(1);
  });

  test("when the retry fails too, both errors are in the message", async () => {
    const { gpu } = fakeGpu(["wgpu-cooperative-matrix", "shader-f16"], (f) => (f.includes("wgpu-cooperative-matrix") ? "experimental features are not enabled" : "device lost"));
    await expect(openDevice(gpu)).rejects.toThrow(/experimental features are not enabled.*device lost/s);
  });
});
