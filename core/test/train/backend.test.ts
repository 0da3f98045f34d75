import { expect, test } from "bun:test";
import { createBackend } from "../../../kernels/src/select.ts";
import { destroyBackend, selectTrainBackend } from "../../src/train/backend.ts";

test("auto: webgpu on a real GPU, cpu when the adapter is a CPU-type (software) one; explicit kinds kept", async () => {
  // What plain createBackend("auto") finds here decides the expectation (lavapipe here, a GPU on the H200).
  const probe = await createBackend("auto");
  const found = probe.backend.info;
  destroyBackend(probe.backend);
  const auto = await selectTrainBackend("auto");
  try {
    if (found.name === "webgpu" && found.adapterType === "cpu") {
      expect(auto.backend.info.name).toBe("cpu");
      expect(auto.reason).toContain(`the WebGPU adapter "${found.adapter}" is a CPU-type (software Vulkan) one`);
      expect(auto.reason).toContain('set backend "webgpu" to use it anyway');
    } else {
      expect(auto.backend.info.name).toBe(found.name);
      expect(auto.backend.info.adapter).toBe(found.adapter);
    }
  } finally {
    destroyBackend(auto.backend);
  }
  const cpu = await selectTrainBackend("cpu");
  expect(cpu.backend.info.name).toBe("cpu");
  expect(cpu.reason).toBe("cpu: requested (backend: cpu)");
  if (found.name === "webgpu") {
    const gpu = await selectTrainBackend("webgpu");
    expect(gpu.backend.info.name).toBe("webgpu");
    expect(gpu.backend.info.adapter).toBe(found.adapter);
    destroyBackend(gpu.backend);
  }
}, 30_000);
