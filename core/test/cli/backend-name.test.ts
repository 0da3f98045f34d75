/**
 * A wrong backend name's did-you-mean: "gpu" (and cuda, vulkan, metal, ...) means the WebGPU
 * backend, where the edit-distance suggestion offered "cpu" for "gpu" — in `train --backend`,
 * `eval`/`generate --backend` (generate-eval.test.ts) and the job's `backend` key.
 */
import { describe, expect, test } from "bun:test";
import { parseTrainArgs } from "../../src/cli/args.ts";
import { suggestBackend } from "../../src/config/backend-name.ts";
import { ConfigError, DEFAULT_JOB, resolveJobConfig } from "../../src/config/index.ts";

describe("backend did-you-mean", () => {
  test("GPU-ish names suggest webgpu; typos the nearest name", () => {
    for (const v of ["gpu", "GPU", "cuda", "vulkan", "metal", "wgpu"]) expect(suggestBackend(v)).toBe("webgpu");
    expect(suggestBackend("webgpo")).toBe("webgpu");
    expect(suggestBackend("cpuu")).toBe("cpu");
    expect(suggestBackend("zzzzzzzz")).toBeNull();
  });
  test("train --backend gpu and a job's backend \"gpu\" name webgpu", () => {
    expect(() => parseTrainArgs(["--backend", "gpu"])).toThrow('--backend: expected auto, webgpu or cpu, got "gpu"; did you mean webgpu? (the GPU backend)');
    try {
      resolveJobConfig({ ...DEFAULT_JOB, backend: "gpu" });
      throw new Error("unreachable");
    } catch (e) {
      expect((e as ConfigError).issues.find((i) => i.path === "backend")?.message).toContain('did you mean "webgpu"?');
    }
  });
});
