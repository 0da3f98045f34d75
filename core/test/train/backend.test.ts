import { expect, test } from "bun:test";
import { createBackend } from "@zeromoe/kernels";
import { destroyBackend, probeShapeOf, selectTrainBackend } from "../../src/train/backend.ts";
import type { ModelConfig } from "../../src/config/types.ts";

const DEFAULT_MODEL = { hidden_size: 64, intermediate_size: 128 } as ModelConfig;

test("probeShapeOf: tokens of the job, hidden size, and the feed-forward width (moe_intermediate_size when the family has one)", () => {
  expect(probeShapeOf({ hidden_size: 96, intermediate_size: 344 } as ModelConfig, 7 * 13)).toEqual({ tokens: 91, hidden: 96, ffn: 344 });
  expect(probeShapeOf({ hidden_size: 96, intermediate_size: 344, moe_intermediate_size: 48 } as unknown as ModelConfig, 0)).toEqual({ tokens: 1, hidden: 96, ffn: 48 });
});

test("auto: a hardware adapter as found; a software one (lavapipe) only when it beats the cpu backend on the job's probe; explicit kinds kept", async () => {
  // What createBackend finds here decides the expectation (lavapipe here, a GPU on the H200).
  const first = await createBackend("auto", { choose: "first-adapter" });
  const found = first.backend.info;
  destroyBackend(first.backend);
  const auto = await selectTrainBackend("auto", 0, probeShapeOf(DEFAULT_MODEL, 8 * 64));
  try {
    if (found.name === "webgpu" && found.adapterType !== "cpu") {
      expect(auto.backend.info.adapter).toBe(found.adapter);
    } else if (found.name === "webgpu") {
      expect(auto.reason).toMatch(/probe 512×64×128: cpu [\d.]+ ms, webgpu [\d.]+ ms/);
      expect(auto.backend.info.name === "cpu" ? "cpu" : auto.backend.info.adapter).toBe(auto.backend.info.name === "cpu" ? "cpu" : found.adapter);
    } else {
      expect(auto.backend.info.name).toBe("cpu");
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
}, 300_000);
