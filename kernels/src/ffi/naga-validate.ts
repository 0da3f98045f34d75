/**
 * WGSL validated by naga without a device, through our library's `zm_naga_validate_wgsl`
 * (native/wgpu-coop/src/validate.rs): naga's WGSL front end and validator with every capability
 * (cooperative matrix, f16, subgroups) and every validation flag (control-flow uniformity
 * included) on. It lets a machine whose driver lacks VK_KHR_cooperative_matrix — CI's lavapipe —
 * check that the tensor-core kernels would compile on one that has it (wgpu validates the same
 * way when it creates the module). Only our library has the function; the prebuilt wgpu-native
 * does not.
 */
import { loadNative } from "./native.ts";

/** Most bytes of a diagnostic kept (naga's messages for one error are a few hundred bytes). */
const MAX_MESSAGE = 1 << 16;

/**
 * naga's verdict on `source` (UTF-8 WGSL): "" when it parses and validates, else the diagnostic
 * (at most 64 KiB). `libraryPath` selects the library as {@link loadNative} does.
 * @throws Error when the loaded library has no validator (the prebuilt wgpu-native, or an older
 *   build of native/wgpu-coop).
 */
export function nagaValidateWgsl(source: string, libraryPath?: string): string {
  const native = loadNative(libraryPath);
  if (!native.validate) throw new Error(`naga validation needs our wgpu library (native/wgpu-coop, ZEROMOE_WGPU=coop) built with zm_naga_validate_wgsl; ${native.location.libraryPath} lacks it`);
  const code = new TextEncoder().encode(source);
  const out = new Uint8Array(MAX_MESSAGE);
  const n = Number(native.validate.zm_naga_validate_wgsl(code.length > 0 ? code : new Uint8Array(1), code.length, out, out.length));
  return new TextDecoder().decode(out.subarray(0, Math.min(n, out.length)));
}
