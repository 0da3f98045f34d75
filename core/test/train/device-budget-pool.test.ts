/**
 * A device memory budget over the webgpu backend's buffer pool (lavapipe): freed buffers kept for
 * reuse count against the budget, and are released before an allocation is refused — so real
 * device memory stays within max_device_memory and the pool never causes a refusal by itself.
 */
import { describe, expect, test } from "bun:test";
import { createBackend, type WebGpuBackend } from "@zeromoe/kernels";
import { DeviceBudgetError, withDeviceBudget } from "../../src/train/device-budget.ts";

const MiB = 1 << 20;

async function webgpu(): Promise<WebGpuBackend | null> {
  try {
    return (await createBackend("webgpu", {})).backend as WebGpuBackend;
  } catch {
    return null;
  }
}

describe("device budget and the buffer pool", () => {
  test("pooled bytes count, and are released before an allocation is refused", async () => {
    const raw = await webgpu();
    if (!raw) return; // no adapter on this machine: nothing to check
    try {
      const be = withDeviceBudget(raw, 8 * MiB);
      const a = be.alloc("f32", (3 * MiB) / 4, "activation"); // 3 MiB
      const b = be.alloc("f32", (3 * MiB) / 4, "activation");
      be.free(a);
      be.free(b);
      await be.flush();
      expect(raw.stats().pooledBytes).toBeGreaterThanOrEqual(6 * MiB);
      // 5 MiB fits the budget only once the 6 MiB of pooled buffers are gone
      const c = be.alloc("f32", (5 * MiB) / 4, "activation");
      expect(raw.stats().pooledBytes).toBe(0);
      // the budget still refuses what cannot fit
      expect(() => be.alloc("f32", (4 * MiB) / 4, "activation")).toThrow(DeviceBudgetError);
      be.free(c);
    } finally {
      raw.destroy();
    }
  });
});
