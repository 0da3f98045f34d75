/**
 * Backend selection: `createBackend("auto" | "webgpu" | "cpu", opts)` → `{ backend, reason }`.
 *
 * - "cpu": the TypeScript {@link CpuBackend}.
 * - "webgpu": a {@link WebGpuBackend} on `opts.gpu`, else the host's `navigator.gpu` (Deno, a
 *   browser), else our wgpu-native binding (`kernels/src/ffi`, loaded on demand so this file also
 *   runs where bun:ffi does not exist). The device must pass a verification computation (a small
 *   integer matmul and an affine map with exactly representable results); otherwise it throws.
 * - "auto": the faster of what works. A hardware adapter (discrete, integrated or virtual GPU) that
 *   passes verification is used as is. A CPU-type adapter (Mesa lavapipe / llvmpipe: a real,
 *   conformant software device, Vulkan or OpenGL) runs on the same cores as the TypeScript cpu
 *   backend, so the two are raced on a short measured probe of the job's shape
 *   (`opts.probe`, speed-probe.ts) and the faster is kept; `reason` gives both times. On any
 *   failure (no library, no adapter, no device, wrong results) it falls back to the cpu backend,
 *   with `reason` naming why. With `choose: "first-adapter"` auto keeps the first adapter that
 *   computes correctly, software or not (tests that must run WebGPU on lavapipe use it, or ask for
 *   "webgpu" explicitly).
 *   Adapters that compute nothing (e.g. a null fallback device) fail verification.
 */
import type { Backend } from "./backend.ts";
import { CpuBackend, type CpuBackendOptions } from "./cpu/index.ts";
import { WebGpuBackend, type WebGpuBackendOptions } from "./webgpu/index.ts";
import { ensureRuntimeDir } from "./ffi/runtime-dir.ts";
import { DEFAULT_PROBE_SHAPE, clampProbeShape, prepareProbe, type PreparedProbe, type ProbeShape } from "./speed-probe.ts";

/** Which backend to create. */
export type BackendKind = "auto" | "webgpu" | "cpu";

/** Options of {@link createBackend}. */
export interface CreateBackendOptions extends WebGpuBackendOptions {
  /** A WebGPU implementation to use instead of `navigator.gpu` / the ffi binding. */
  gpu?: GPU;
  /** Options of the cpu backend (also used for the fallback). */
  cpu?: CpuBackendOptions;
  /** Run the verification computation on a webgpu device (default true). */
  verify?: boolean;
  /** This rank's index among the ranks of its machine: with several GPUs, rank r takes the r-th
   * (mod count) GPU adapter (see {@link adapterIndexForRank}). Ignored when `adapterIndex` is set. */
  localRank?: number;
  /** "auto" only: "fastest" (default) races a software adapter against the cpu backend on
   * {@link probe}; "first-adapter" keeps the first adapter that computes correctly. */
  choose?: "fastest" | "first-adapter";
  /** "auto" only: the job's sizes for the speed probe (default {@link DEFAULT_PROBE_SHAPE}). */
  probe?: ProbeShape;
}

/** What {@link adapterIndexForRank} needs to know of an adapter (our ffi binding's non-standard
 * `GPUAdapterInfo.adapterType` / `backendType`). */
export interface AdapterKind {
  adapterType: string;
  backendType: string;
}

/**
 * One GPU per rank on a machine with several (like `torch.cuda.set_device(local_rank)`): the
 * candidates are the adapters of type discrete-gpu or integrated-gpu — only the Vulkan ones when any
 * exists, since the same card is usually also listed through OpenGL — in enumeration order; rank
 * `localRank` takes candidate `localRank mod count`. Returns the index into `adapters`, or
 * `undefined` when there are fewer than two candidates (the default adapter choice then applies).
 * @throws on a negative or non-integer localRank.
 */
export function adapterIndexForRank(adapters: readonly AdapterKind[], localRank: number): number | undefined {
  if (!Number.isInteger(localRank) || localRank < 0) throw new Error(`adapterIndexForRank: localRank must be a non-negative integer, got ${localRank}`);
  const gpus = adapters.map((a, i) => ({ a, i })).filter(({ a }) => a.adapterType === "discrete-gpu" || a.adapterType === "integrated-gpu");
  const vulkan = gpus.filter(({ a }) => a.backendType === "vulkan");
  const cands = vulkan.length > 0 ? vulkan : gpus;
  if (cands.length < 2) return undefined;
  return cands[localRank % cands.length]!.i;
}

/** The chosen backend and a one-line human-readable reason. */
export interface SelectedBackend {
  backend: Backend;
  reason: string;
}

/** The WebGPU entry point: explicit, host-provided, or our ffi binding (dynamic import). */
async function findGPU(explicit?: GPU): Promise<{ gpu: GPU; source: string }> {
  if (explicit) return { gpu: explicit, source: "the GPU object passed in options" };
  // before navigator.gpu is first read (Deno creates its instance then): no driver warning
  if (typeof (globalThis as { navigator?: object }).navigator === "object") ensureRuntimeDir();
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (nav?.gpu) {
    return { gpu: nav.gpu, source: "navigator.gpu" };
  }
  const ffi = (await import("./ffi/index.ts")) as { createGPU: () => GPU };
  return { gpu: ffi.createGPU(), source: "wgpu-native via bun:ffi" };
}

/**
 * Check that `be` computes: C = A·B for small integer matrices (exact in f32) and y = 2x + 1.
 * Throws describing the first mismatch.
 */
export async function verifyBackend(be: Backend): Promise<void> {
  const M = 3;
  const K = 5;
  const N = 4;
  const A = Float32Array.from({ length: M * K }, (_, i) => (i % 7) - 3);
  const B = Float32Array.from({ length: K * N }, (_, i) => (i % 5) - 2);
  const a = be.alloc("f32", M * K, "other");
  const b = be.alloc("f32", K * N, "other");
  const c = be.alloc("f32", M * N, "other");
  const y = be.alloc("f32", 7, "other");
  try {
    be.write({ buf: a, off: 0 }, A);
    be.write({ buf: b, off: 0 }, B);
    be.matmul({ buf: a, off: 0 }, { buf: b, off: 0 }, { buf: c, off: 0 }, { M, N, K });
    be.affine({ buf: a, off: 1 }, { buf: y, off: 0 }, 7, 2, 1);
    const got = await be.read({ buf: c, off: 0 }, M * N);
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += A[i * K + k]! * B[k * N + j]!;
        if (got[i * N + j] !== s) throw new Error(`verification matmul: C[${i},${j}] = ${got[i * N + j]}, expected ${s}`);
      }
    }
    const gy = await be.read({ buf: y, off: 0 }, 7);
    for (let i = 0; i < 7; i++) {
      const want = 2 * A[i + 1]! + 1;
      if (gy[i] !== want) throw new Error(`verification affine: y[${i}] = ${gy[i]}, expected ${want}`);
    }
  } finally {
    be.free(a);
    be.free(b);
    be.free(c);
    be.free(y);
  }
}

/** Display names of wgpu's backend types (WGPUBackendType, kernels/src/ffi/constants.ts). */
const BACKEND_DISPLAY_NAMES: Readonly<Record<string, string>> = {
  vulkan: "Vulkan",
  opengl: "OpenGL",
  opengles: "OpenGL ES",
  metal: "Metal",
  d3d12: "Direct3D 12",
  d3d11: "Direct3D 11",
  webgpu: "WebGPU",
};

/**
 * The note {@link createBackend}'s reason adds for a software adapter: "" unless `adapterType` is
 * "cpu"; otherwise it names the adapter's actual graphics API (`adapterBackend`, e.g. "vulkan" for
 * lavapipe, "opengl" for llvmpipe through EGL when Vulkan is absent), e.g.
 * "; a software (CPU) OpenGL driver: correct but slow". An unknown API is named as given.
 */
export function softwareDriverNote(adapterType: string, adapterBackend: string): string {
  if (adapterType !== "cpu") return "";
  const api = BACKEND_DISPLAY_NAMES[adapterBackend.toLowerCase()] ?? (adapterBackend === "" || adapterBackend === "unknown" ? "" : adapterBackend);
  return `; a software (CPU) ${api ? `${api} ` : ""}driver: correct but slow`;
}

async function makeWebGpu(opts: CreateBackendOptions): Promise<SelectedBackend> {
  let found: { gpu: GPU; source: string };
  try {
    found = await findGPU(opts.gpu);
  } catch (e) {
    throw new Error(`no WebGPU implementation: ${(e as Error).message}`);
  }
  let adapterIndex = opts.adapterIndex;
  const enumerate = (found.gpu as unknown as { enumerateAdapters?: () => Promise<GPUAdapter[]> }).enumerateAdapters;
  if (adapterIndex === undefined && opts.localRank !== undefined && typeof enumerate === "function") {
    const list = await enumerate.call(found.gpu);
    adapterIndex = adapterIndexForRank(
      list.map((a) => a.info as unknown as AdapterKind),
      opts.localRank,
    );
  }
  const be = await WebGpuBackend.create(found.gpu, { powerPreference: "high-performance", ...opts, adapterIndex });
  if (opts.verify !== false) {
    try {
      await verifyBackend(be);
    } catch (e) {
      be.destroy();
      throw new Error(`adapter "${be.info.adapter}" failed the verification computation: ${(e as Error).message}`);
    }
  }
  const i = be.info;
  const soft = softwareDriverNote(i.adapterType, i.adapterBackend);
  return { backend: be, reason: `webgpu on "${i.adapter}" (${i.adapterType}, ${i.adapterBackend}) through ${found.source}${opts.verify !== false ? ", verified by a test computation" : ""}${soft}` };
}

/**
 * Create the backend of `kind` (see the file header). "webgpu" throws when no working device is
 * found (message says why); "auto" never throws for that reason and falls back to cpu.
 */
export async function createBackend(kind: BackendKind, opts: CreateBackendOptions = {}): Promise<SelectedBackend> {
  switch (kind) {
    case "cpu":
      return { backend: new CpuBackend(opts.cpu), reason: "cpu: requested (backend: cpu)" };
    case "webgpu":
      try {
        return await makeWebGpu(opts);
      } catch (e) {
        throw new Error(`backend "webgpu" requested but unavailable: ${(e as Error).message}`);
      }
    case "auto": {
      let r: SelectedBackend;
      try {
        r = await makeWebGpu(opts);
      } catch (e) {
        return { backend: new CpuBackend(opts.cpu), reason: `auto → cpu (TypeScript), because WebGPU is unusable: ${(e as Error).message}` };
      }
      if (r.backend.info.adapterType !== "cpu" || opts.choose === "first-adapter") return { backend: r.backend, reason: `auto → ${r.reason}` };
      return raceSoftwareAdapter(r, opts);
    }
    default:
      throw new Error(`createBackend: kind must be "auto", "webgpu" or "cpu", got "${String(kind)}"`);
  }
}

/** Timed repetitions per backend in the race (alternating between the two). */
const RACE_ROUNDS = 5;

/**
 * "auto" with a software (CPU-type) adapter: time the speed probe (speed-probe.ts) on it and on the
 * TypeScript cpu backend, alternating {@link RACE_ROUNDS} repetitions each after a warm-up, keep
 * the faster by its best repetition (ties go to cpu, which needs no driver) and free the other. A
 * probe that throws on the adapter counts as a loss for it. The reason names both times.
 */
async function raceSoftwareAdapter(gpu: SelectedBackend, opts: CreateBackendOptions): Promise<SelectedBackend> {
  const shape = clampProbeShape(opts.probe ?? DEFAULT_PROBE_SHAPE);
  const cpu = new CpuBackend(opts.cpu);
  const what = `probe ${shape.tokens}×${shape.hidden}×${shape.ffn}`;
  let gpuMs = Infinity;
  let cpuMs = Infinity;
  let gp: PreparedProbe | null = null;
  const cp = await prepareProbe(cpu, shape);
  try {
    gp = await prepareProbe(gpu.backend, shape);
    for (let r = 0; r < RACE_ROUNDS; r++) {
      cpuMs = Math.min(cpuMs, await cp.run());
      gpuMs = Math.min(gpuMs, await gp.run());
    }
  } catch (e) {
    gp?.free();
    cp.free();
    destroy(gpu.backend);
    return { backend: cpu, reason: `auto → cpu (TypeScript): the only WebGPU adapter, "${gpu.backend.info.adapter}", is a software one and failed the speed ${what}: ${(e as Error).message}` };
  }
  gp.free();
  cp.free();
  const times = `${what}: cpu ${cpuMs.toFixed(1)} ms, webgpu ${gpuMs.toFixed(1)} ms`;
  if (gpuMs < cpuMs) return { backend: gpu.backend, reason: `auto → ${gpu.reason}; faster than the TypeScript cpu backend on this job (${times})` };
  destroy(gpu.backend);
  return { backend: cpu, reason: `auto → cpu (TypeScript): faster on this job than webgpu on the software adapter "${gpu.backend.info.adapter}" (${gpu.backend.info.adapterBackend}) (${times})` };
}

function destroy(be: Backend): void {
  (be as { destroy?: () => void }).destroy?.();
}
