/**
 * GPUShaderModule over a WGPUShaderModule (WebGPU spec §9). A module only exists once its WGSL
 * compiled (device.createShaderModule throws GPUShaderCompilationError otherwise), so
 * getCompilationInfo has no errors to report; wgpu-native does not implement
 * wgpuShaderModuleGetCompilationInfo and gives no warnings, so its message list is empty.
 */
import type { Pointer } from "bun:ffi";
import type { GPUDeviceImpl } from "./device.ts";

/** WebGPU GPUShaderModule implemented over a WGPUShaderModule handle. */
export class GPUShaderModuleImpl {
  readonly __brand = "GPUShaderModule" as const;
  label: string;

  constructor(
    readonly device: GPUDeviceImpl,
    readonly handle: Pointer,
    label: string,
  ) {
    this.label = label;
    const lib = device.ctx.native.lib;
    device.ctx.track(this, handle, (h) => lib.wgpuShaderModuleRelease(h));
  }

  /** Spec getCompilationInfo: always an empty message list here (see the file comment). */
  async getCompilationInfo(): Promise<GPUCompilationInfo> {
    return { __brand: "GPUCompilationInfo", messages: [] } as unknown as GPUCompilationInfo;
  }
}
