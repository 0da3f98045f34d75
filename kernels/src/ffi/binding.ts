/**
 * GPUBindGroupLayout, GPUPipelineLayout and GPUBindGroup over their wgpu-native handles
 * (WebGPU spec §8). Released when garbage-collected (the spec has no destroy for them).
 */
import type { Pointer } from "../runtime/ffi.ts";
import type { GPUBufferImpl } from "./buffer.ts";
import type { GPUDeviceImpl } from "./device.ts";

/** WebGPU GPUBindGroupLayout over a WGPUBindGroupLayout handle. */
export class GPUBindGroupLayoutImpl {
  readonly __brand = "GPUBindGroupLayout" as const;
  label: string;
  constructor(
    readonly device: GPUDeviceImpl,
    readonly handle: Pointer,
    label: string,
  ) {
    this.label = label;
    device.ctx.track(this, handle, "wgpuBindGroupLayoutRelease");
  }
}

/** WebGPU GPUPipelineLayout over a WGPUPipelineLayout handle. */
export class GPUPipelineLayoutImpl {
  readonly __brand = "GPUPipelineLayout" as const;
  label: string;
  /** @param layouts the bind group layouts, kept referenced while this layout lives. */
  constructor(
    readonly device: GPUDeviceImpl,
    readonly handle: Pointer,
    label: string,
    readonly layouts: readonly GPUBindGroupLayoutImpl[],
  ) {
    this.label = label;
    device.ctx.track(this, handle, "wgpuPipelineLayoutRelease");
  }
}

/** WebGPU GPUBindGroup over a WGPUBindGroup handle. */
export class GPUBindGroupImpl {
  readonly __brand = "GPUBindGroup" as const;
  label: string;
  /** @param buffers the bound buffers, kept referenced while this bind group lives. */
  constructor(
    readonly device: GPUDeviceImpl,
    readonly handle: Pointer,
    label: string,
    readonly buffers: readonly GPUBufferImpl[],
  ) {
    this.label = label;
    device.ctx.track(this, handle, "wgpuBindGroupRelease");
  }
}
