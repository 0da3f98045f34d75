/**
 * GPUShaderModule over a WGPUShaderModule (WebGPU spec §9). A module only exists once its WGSL
 * compiled (device.createShaderModule throws GPUShaderCompilationError otherwise), so
 * getCompilationInfo has no errors to report; wgpu-native does not implement
 * wgpuShaderModuleGetCompilationInfo and gives no warnings, so its message list is empty.
 *
 * Non-standard: {@link createShaderModuleTrusted} creates a module through wgpu.h's
 * `wgpuDeviceCreateShaderModuleTrusted`, which lets the caller switch off the runtime checks naga
 * adds to the generated code (index clamping of arrays and buffers, loop bounding).
 */
import type { Pointer } from "../runtime/ffi.ts";
import type { GPUDeviceImpl } from "./device.ts";
import { GPUShaderCompilationError, parseWGSLDiagnostics } from "./errors.ts";
import { utf8 } from "./native.ts";

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
    device.ctx.track(this, handle, "wgpuShaderModuleRelease");
  }

  /** Spec getCompilationInfo: always an empty message list here (see the file comment). */
  async getCompilationInfo(): Promise<GPUCompilationInfo> {
    return { __brand: "GPUCompilationInfo", messages: [] } as unknown as GPUCompilationInfo;
  }
}

/** Which of naga's runtime checks a trusted module keeps (wgpu.h `WGPUShaderRuntimeChecks`). */
export interface ShaderRuntimeChecks {
  /** Clamp array/buffer indices into range ("Restrict" bounds-check policies). Off: an index out
   * of range is undefined behaviour, so only kernels whose indices are proven in range by tests
   * may switch it off. */
  boundsChecks: boolean;
  /** Bound every loop's trip count. Off: every loop of the shader must terminate. */
  forceLoopBounding: boolean;
}

/**
 * Create a WGSL shader module with the given runtime checks (wgpu-native's non-standard
 * `wgpuDeviceCreateShaderModuleTrusted`, wgpu.h of wgpu-native 29). `device` must be a device of
 * this FFI binding (GPUDeviceImpl); anything else throws a TypeError. A WGSL compile error throws
 * {@link GPUShaderCompilationError}, as createShaderModule does.
 */
export function createShaderModuleTrusted(device: GPUDevice, descriptor: GPUShaderModuleDescriptor, checks: ShaderRuntimeChecks): GPUShaderModuleImpl {
  const d = device as unknown as GPUDeviceImpl;
  if (typeof d.scoped !== "function" || !d.ctx?.native?.shim) throw new TypeError("createShaderModuleTrusted: the device is not a device of the wgpu-native FFI binding");
  d.ensureAlive("createShaderModuleTrusted");
  const n = d.ctx.native;
  const code = utf8(descriptor.code);
  const label = utf8(descriptor.label);
  const bits = (checks.boundsChecks ? 1 : 0) | (checks.forceLoopBounding ? 2 : 0);
  const { value: h, error } = d.scoped(() => n.shim.zm_create_shader_module_wgsl_trusted(d.handle, code.bytes ?? new Uint8Array(1), code.len, label.bytes, label.len, bits));
  if (error) {
    if (h) n.lib.wgpuShaderModuleRelease(h);
    throw new GPUShaderCompilationError(descriptor.label ?? "", error.message, parseWGSLDiagnostics(error.message));
  }
  if (!h) throw new Error(`createShaderModuleTrusted: wgpu-native returned no module for '${descriptor.label ?? ""}'`);
  return new GPUShaderModuleImpl(d, h, descriptor.label ?? "");
}
