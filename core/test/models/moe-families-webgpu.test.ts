/**
 * The sparse Hugging Face families on the WebGPU backend (the first adapter: Mesa's lavapipe here
 * and in CI; the cpu backend where none exists) against their Transformers 5.17 fixtures, Hub
 * layout: logits, loss, aux loss and router logits within 1e-5 relative to the tensor's max, every
 * gradient within 1e-4 — the cpu backend's tolerances (observed on lavapipe: qwen3_moe logits
 * 9.5e-7, gradients 4.2e-6; qwen2_moe 5.9e-7, 1.5e-6; deepseek_v3 1.3e-6, 3.7e-6; deepseek_v2
 * 1.3e-6, 6.0e-6).
 */
import { describe, expect, test } from "bun:test";
import { createBackend } from "@zeromoe/kernels";
import { hfParity } from "./hf-moe-parity.ts";

describe("sparse families on WebGPU", () => {
  for (const family of ["qwen3_moe", "qwen2_moe", "deepseek_v3", "deepseek_v2"]) {
    test(family, async () => {
      const { backend: be, reason } = await createBackend("auto", { choose: "first-adapter" });
      const r = await hfParity(`core/test/fixtures/${family}`, "model.safetensors", be, 1e-4);
      console.log(`${family} on ${be.info.name} (${reason}): logits ${r.logits.toExponential(2)} loss ${r.loss.toExponential(2)} aux ${r.aux.toExponential(2)} router ${r.router.toExponential(2)} grads ${r.grad.toExponential(2)}`);
      expect(r.logits).toBeLessThan(1e-5);
      expect(r.loss).toBeLessThan(1e-5);
      expect(r.aux).toBeLessThan(1e-5);
      expect(r.router).toBeLessThan(1e-5);
      expect(be.memory().current.activation).toBe(0);
    }, 300_000);
  }
});
