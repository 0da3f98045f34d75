/**
 * Compute pipeline cache keyed by the complete WGSL source (constants such as workgroup sizes and
 * unrolled ranks are baked into the source, so the source is the whole key). Each pipeline gets an
 * explicit bind-group layout: binding 0 the `Params` uniform (dynamic offset: one bind group serves
 * every uniform slot of the batch arena), bindings 1…k storage buffers
 * (read-only or read-write as the kernel declares).
 *
 * Trusted kernels: kernels whose label starts with one of `trustedPrefixes` are compiled without
 * naga's runtime checks (index clamping, loop bounding) through the non-standard
 * `device.createShaderModuleTrusted` of our wgpu-native binding (ffi/shader.ts); only kernels
 * whose every index is guarded in the WGSL itself and covered by tests belong there.
 */
import { ShaderStage } from "./constants.ts";
import type { AssembledKernel } from "./kernel.ts";

/** The non-standard method of the FFI binding's device (ffi/shader.ts). */
interface TrustedDevice {
  createShaderModuleTrusted(d: GPUShaderModuleDescriptor, checks: { boundsChecks: boolean; forceLoopBounding: boolean }): GPUShaderModule;
}

/** Whether `device` can compile trusted kernels: it has the FFI binding's non-standard
 * `createShaderModuleTrusted` (ffi/shader.ts); other WebGPU implementations do not. */
export function offersTrustedShaders(device: GPUDevice): boolean {
  return typeof (device as unknown as Partial<TrustedDevice>).createShaderModuleTrusted === "function";
}

/** A compiled kernel ready to bind. */
export interface CachedPipeline {
  pipeline: GPUComputePipeline;
  layout: GPUBindGroupLayout;
  /** Unique per pipeline (bind-group cache key). */
  id: number;
}

/** Creates pipelines on first use and returns the cached one afterwards. */
export class PipelineCache {
  private readonly cache = new Map<string, CachedPipeline>();
  /** Host milliseconds spent compiling (shader module + pipeline creation), all pipelines. */
  compileMs = 0;
  /**
   * @param trustedPrefixes kernel label prefixes compiled without runtime checks (see the file
   *   comment); non-empty only on a device that has `createShaderModuleTrusted` (else TypeError).
   */
  constructor(
    private readonly device: GPUDevice,
    private readonly trustedPrefixes: readonly string[] = [],
  ) {
    if (trustedPrefixes.length > 0 && !offersTrustedShaders(device)) {
      throw new TypeError(`webgpu: trusted shaders (${trustedPrefixes.join(", ")}) need the wgpu-native FFI binding's createShaderModuleTrusted; this WebGPU implementation has none`);
    }
  }

  /** Number of distinct pipelines compiled so far. */
  get size(): number {
    return this.cache.size;
  }

  /** The cached pipeline for a complete WGSL source, if compiled already. */
  lookup(source: string): CachedPipeline | undefined {
    return this.cache.get(source);
  }

  /** The pipeline for `k` (label used for debugging only). */
  get(label: string, k: AssembledKernel): CachedPipeline {
    const hit = this.cache.get(k.source);
    if (hit) return hit;
    const t0 = performance.now();
    const entries: GPUBindGroupLayoutEntry[] = [{ binding: 0, visibility: ShaderStage.COMPUTE, buffer: { type: "uniform", hasDynamicOffset: true } }];
    k.slots.forEach((s, i) => entries.push({ binding: i + 1, visibility: ShaderStage.COMPUTE, buffer: { type: s.write ? "storage" : "read-only-storage" } }));
    const layout = this.device.createBindGroupLayout({ label, entries });
    const trusted = this.trustedPrefixes.some((p) => label.startsWith(p));
    const module = trusted
      ? (this.device as unknown as TrustedDevice).createShaderModuleTrusted({ label, code: k.source }, { boundsChecks: false, forceLoopBounding: false })
      : this.device.createShaderModule({ label, code: k.source });
    const pipeline = this.device.createComputePipeline({
      label,
      layout: this.device.createPipelineLayout({ label, bindGroupLayouts: [layout] }),
      compute: { module, entryPoint: "main" },
    });
    const c = { pipeline, layout, id: this.cache.size + 1 };
    this.cache.set(k.source, c);
    this.compileMs += performance.now() - t0;
    return c;
  }
}
