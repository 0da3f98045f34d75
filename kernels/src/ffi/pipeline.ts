/**
 * GPUComputePipeline over a WGPUComputePipeline (WebGPU spec §10.3), with getBindGroupLayout for
 * `layout: "auto"` pipelines.
 */
import type { Pointer } from "../runtime/ffi.ts";
import { GPUBindGroupLayoutImpl } from "./binding.ts";
import type { GPUDeviceImpl } from "./device.ts";

/** WebGPU GPUComputePipeline implemented over a WGPUComputePipeline handle. */
export class GPUComputePipelineImpl {
  readonly __brand = "GPUComputePipeline" as const;
  label: string;
  private readonly layouts = new Map<number, GPUBindGroupLayoutImpl>();

  constructor(
    readonly device: GPUDeviceImpl,
    readonly handle: Pointer,
    label: string,
  ) {
    this.label = label;
    device.ctx.track(this, handle, "wgpuComputePipelineRelease");
  }

  /** The bind group layout of group `index` (cached per index).
   * @throws GPUUncapturedError (validation) when `index` is out of range and nobody listens. */
  getBindGroupLayout(index: number): GPUBindGroupLayoutImpl {
    const hit = this.layouts.get(index);
    if (hit) return hit;
    this.device.ensureAlive("getBindGroupLayout");
    const h = this.device.ctx.native.lib.wgpuComputePipelineGetBindGroupLayout(this.handle, index);
    this.device.checkErrors(`getBindGroupLayout(${index}) of pipeline '${this.label}'`);
    if (!h) throw new RangeError(`getBindGroupLayout: pipeline '${this.label}' has no bind group ${index}`);
    const layout = new GPUBindGroupLayoutImpl(this.device, h, `${this.label}/group${index}`);
    this.layouts.set(index, layout);
    return layout;
  }
}
