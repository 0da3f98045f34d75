import { expect, test } from "bun:test";
import { createBackend } from "@zeromoe/kernels";
import { destroyBackend, selectTrainBackend } from "../../src/train/backend.ts";

test("auto: the adapter createBackend finds (a software Vulkan adapter such as lavapipe counts, and is named as CPU-type); explicit kinds kept", async () => {
  // What plain createBackend("auto") finds here decides the expectation (lavapipe here, a GPU on the H200).
  const probe = await createBackend("auto");
  const found = probe.backend.info;
  destroyBackend(probe.backend);
  const auto = await selectTrainBackend("auto");
  try {
    expect(auto.backend.info.name).toBe(found.name);
    expect(auto.backend.info.adapter).toBe(found.adapter);
    if (found.name === "webgpu" && found.adapterType === "cpu") expect(auto.reason).toContain("(cpu, ");
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
