/**
 * createBackend: "cpu" and "auto"/"webgpu" on this machine's real adapter (lavapipe in CI: a CPU
 * Vulkan driver, which counts as real), the fallback when there is no adapter, and the refusal of
 * a device that computes nothing (its queue drops every submission), caught by the verification
 * computation.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "../../src/cpu/index.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { adapterIndexForRank, createBackend, softwareDriverNote, verifyBackend } from "../../src/select.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { PROBE_MAX_MACS, clampProbeShape, timeProbe } from "../../src/speed-probe.ts";

/** Bind methods of `target` so a Proxy can forward them (ffi objects use private state). */
function forward<T extends object>(target: T, override: Record<string, unknown>): T {
  return new Proxy(target, {
    get(t, p) {
      if (typeof p === "string" && p in override) return override[p];
      const v = Reflect.get(t, p, t);
      return typeof v === "function" ? v.bind(t) : v;
    },
  });
}

/** A GPU whose devices accept commands but never run them (like a null fallback device). */
function nullComputeGPU(real: GPU): GPU {
  return forward(real, {
    requestAdapter: async (o?: GPURequestAdapterOptions) => {
      const a = await real.requestAdapter(o);
      if (!a) return null;
      return forward(a, {
        requestDevice: async (d?: GPUDeviceDescriptor) => {
          const dev = await a.requestDevice(d);
          const queue = forward(dev.queue, { submit: (_cbs: GPUCommandBuffer[]) => undefined });
          return forward(dev, { queue });
        },
      });
    },
  });
}

/** A GPU with no adapter. */
const noAdapterGPU = { requestAdapter: async () => null, getPreferredCanvasFormat: () => "rgba8unorm", wgslLanguageFeatures: new Set() } as unknown as GPU;

describe("createBackend", () => {
  test("cpu on request", async () => {
    const { backend, reason } = await createBackend("cpu");
    expect(backend).toBeInstanceOf(CpuBackend);
    expect(reason).toContain("requested");
  });

  test("auto with choose first-adapter picks webgpu on a real adapter (lavapipe counts) and says so", async () => {
    const { backend, reason } = await createBackend("auto", { choose: "first-adapter" }); // no navigator.gpu in Bun: loads the ffi binding
    console.log(reason);
    expect(backend).toBeInstanceOf(WebGpuBackend);
    expect(reason).toContain(backend.info.adapter);
    expect(reason).toContain("verified");
    expect(reason).toContain("wgpu-native via bun:ffi");
    if (backend.info.adapterType === "cpu") expect(reason).toContain("software");
    await verifyBackend(backend); // still computes after selection
    (backend as WebGpuBackend).destroy();
  });

  test("auto (fastest): a software adapter is raced against the cpu backend on the probe and the faster is kept, with both times in the reason", async () => {
    const first = await createBackend("auto", { choose: "first-adapter" });
    const software = first.backend.info.adapterType === "cpu";
    (first.backend as { destroy?: () => void }).destroy?.();
    for (const probe of [{ tokens: 37, hidden: 29, ffn: 53 }, { tokens: 1, hidden: 64, ffn: 128 }]) {
      const { backend, reason } = await createBackend("auto", { probe });
      console.log(reason);
      await verifyBackend(backend);
      if (!software) {
        // a hardware adapter is used without a race
        expect(backend).toBeInstanceOf(WebGpuBackend);
        expect(reason).not.toContain("probe");
      } else {
        const m = /probe (\d+)×(\d+)×(\d+): cpu ([\d.]+) ms, webgpu ([\d.]+) ms/.exec(reason);
        expect(m).not.toBeNull();
        expect([Number(m![1]), Number(m![2]), Number(m![3])]).toEqual([probe.tokens, probe.hidden, probe.ffn]);
        const cpuMs = Number(m![4]);
        const gpuMs = Number(m![5]);
        // the kept backend is the one with the smaller time (ties to cpu)
        if (backend instanceof CpuBackend) expect(cpuMs).toBeLessThanOrEqual(gpuMs + 0.05);
        else expect(gpuMs).toBeLessThan(cpuMs + 0.05);
        expect(reason).toContain(backend instanceof CpuBackend ? "auto → cpu (TypeScript): faster on this job" : "faster than the TypeScript cpu backend");
      }
      (backend as { destroy?: () => void }).destroy?.();
    }
  }, 300_000);

  test("the probe shape is clamped: tokens shrink so one matmul stays within PROBE_MAX_MACS; bad sizes throw", () => {
    expect(clampProbeShape({ tokens: 512, hidden: 64, ffn: 128 })).toEqual({ tokens: 512, hidden: 64, ffn: 128 });
    const big = clampProbeShape({ tokens: 65536, hidden: 8192, ffn: 28672 });
    expect(big.hidden).toBe(4096);
    expect(big.ffn).toBe(4096);
    expect(big.tokens * big.hidden * big.ffn).toBeLessThanOrEqual(PROBE_MAX_MACS);
    expect(big.tokens).toBeGreaterThanOrEqual(1);
    expect(() => clampProbeShape({ tokens: 0, hidden: 64, ffn: 128 })).toThrow(/tokens must be a positive number/);
  });

  test("timeProbe runs on the cpu backend and frees what it allocated", async () => {
    const be = new CpuBackend();
    const before = { ...be.memory().current };
    const ms = await timeProbe(be, { tokens: 13, hidden: 7, ffn: 11 }, 2);
    expect(ms).toBeGreaterThan(0);
    expect(be.memory().current).toEqual(before);
    expect(be.memory().peak.other).toBeGreaterThan(0);
  });

  test("the software-driver note names the adapter's own API (OpenGL llvmpipe is not called Vulkan)", async () => {
    expect(softwareDriverNote("cpu", "vulkan")).toBe("; a software (CPU) Vulkan driver: correct but slow");
    expect(softwareDriverNote("cpu", "opengl")).toBe("; a software (CPU) OpenGL driver: correct but slow");
    expect(softwareDriverNote("cpu", "opengles")).toBe("; a software (CPU) OpenGL ES driver: correct but slow");
    expect(softwareDriverNote("cpu", "unknown")).toBe("; a software (CPU) driver: correct but slow");
    expect(softwareDriverNote("discrete-gpu", "vulkan")).toBe("");
    // the real reason text on an adapter of another API, when this machine has one (llvmpipe through EGL here)
    const real = createGPU() as GPU & { requestAdapter(o?: GPURequestAdapterOptions & { backendType?: string }): Promise<GPUAdapter | null> };
    for (const api of ["opengl", "vulkan"]) {
      if (!(await real.requestAdapter({ backendType: api }))) continue;
      const gpu = forward(real, { requestAdapter: (o?: GPURequestAdapterOptions) => real.requestAdapter({ ...o, backendType: api }) });
      const { backend, reason } = await createBackend("auto", { gpu, choose: "first-adapter" });
      if (backend.info.adapterBackend === "typescript") {
        // an adapter of that API that cannot be used (the H200 host's OpenGL adapter computes
        // nothing, or with wgpu-native 29 refuses the device: "Parent device is lost"): auto falls
        // back to the CPU and says why
        expect(reason).toMatch(/WebGPU is unusable: (adapter .* failed the verification computation|webgpu: requestDevice failed .*)/s);
        continue;
      }
      expect(backend.info.adapterBackend).toBe(api);
      if (backend.info.adapterType === "cpu") expect(reason).toContain(api === "opengl" ? "software (CPU) OpenGL driver" : "software (CPU) Vulkan driver");
      if (api === "opengl") expect(reason).not.toContain("Vulkan");
      (backend as WebGpuBackend).destroy();
    }
  });

  test("auto without any adapter falls back to cpu naming why; webgpu throws", async () => {
    const r = await createBackend("auto", { gpu: noAdapterGPU });
    expect(r.backend).toBeInstanceOf(CpuBackend);
    expect(r.reason).toContain("requestAdapter returned null");
    await expect(createBackend("webgpu", { gpu: noAdapterGPU })).rejects.toThrow(/webgpu.*requestAdapter returned null/);
  });

  test("a device that computes nothing is refused", async () => {
    const gpu = nullComputeGPU(createGPU());
    const r = await createBackend("auto", { gpu });
    console.log(r.reason);
    expect(r.backend).toBeInstanceOf(CpuBackend);
    expect(r.reason).toContain("failed the verification computation");
    await expect(createBackend("webgpu", { gpu })).rejects.toThrow(/verification/);
  });

  test("unknown kind throws", async () => {
    await expect(createBackend("tpu" as never)).rejects.toThrow(/auto.*webgpu.*cpu/);
  });
});

describe("adapterIndexForRank: one GPU per rank", () => {
  const gpu = (backendType: string, adapterType = "discrete-gpu") => ({ backendType, adapterType });
  test("several Vulkan GPUs: rank r takes the r-th (mod count); OpenGL twins and CPU adapters are skipped", () => {
    const list = [gpu("vulkan"), gpu("opengl"), gpu("vulkan"), gpu("vulkan", "cpu"), gpu("vulkan"), gpu("opengl")];
    expect([0, 1, 2, 3, 4].map((r) => adapterIndexForRank(list, r))).toEqual([0, 2, 4, 0, 2]);
  });
  test("no Vulkan GPU: the other GPU adapters are used", () => {
    const list = [gpu("metal", "integrated-gpu"), gpu("metal", "discrete-gpu")];
    expect([0, 1, 2].map((r) => adapterIndexForRank(list, r))).toEqual([0, 1, 0]);
  });
  test("fewer than two GPUs (one H200, or lavapipe only): the default choice (undefined)", () => {
    expect(adapterIndexForRank([gpu("vulkan"), gpu("opengl")], 3)).toBeUndefined();
    expect(adapterIndexForRank([gpu("vulkan", "cpu"), gpu("opengl", "cpu")], 1)).toBeUndefined();
    expect(adapterIndexForRank([], 0)).toBeUndefined();
  });
  test("a bad local rank is an error", () => {
    expect(() => adapterIndexForRank([gpu("vulkan"), gpu("vulkan")], -1)).toThrow(/localRank/);
  });
  test("createBackend with localRank on this machine still finds its adapter", async () => {
    const r = await createBackend("auto", { localRank: 1 });
    expect(["cpu", "webgpu"]).toContain(r.backend.info.name);
    (r.backend as { destroy?: () => void }).destroy?.();
  });
});
