/**
 * The cooperative-matrix configurations a Vulkan driver offers (VK_KHR_cooperative_matrix,
 * `vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR`), read through our own library's extension
 * `zmAdapterCooperativeMatrixProperties` (native/wgpu-coop; wgpu's
 * `Adapter::cooperative_matrix_properties`). The prebuilt wgpu-native has no such query.
 */
// No runtime import of bun:ffi here: the webgpu backend (which also runs on Deno's navigator.gpu)
// reaches this module through wgsl/matmul-coop.ts; typed arrays pass as pointers to bun:ffi calls.
import type { Native } from "./native.ts";

/** Element types of a configuration, as wgpu's `CooperativeScalarType`. */
export type CoopScalar = "f32" | "f16" | "i32" | "u32";

/** One configuration: C[M×N] (crType) += A[M×K] (abType) · B[K×N] (abType), per subgroup. */
export interface CoopMatrixConfig {
  M: number;
  N: number;
  K: number;
  abType: CoopScalar;
  crType: CoopScalar;
  saturatingAccumulation: boolean;
}

const SCALARS: readonly CoopScalar[] = ["f32", "f16", "i32", "u32"];

/**
 * The adapter's configurations, or null when the loaded library cannot tell (the prebuilt
 * wgpu-native). `adapter` must come from this binding (a GPUAdapterImpl).
 * @throws TypeError when `adapter` is not a GPUAdapterImpl of this binding.
 */
export function cooperativeMatrixProperties(adapter: GPUAdapter): CoopMatrixConfig[] | null {
  // GPUAdapterImpl keeps its FFI context private; this module is part of the same binding.
  const impl = adapter as unknown as { handle?: unknown; ctx?: { native?: Native } };
  const native = impl.ctx?.native;
  if (!impl.handle || !native) throw new TypeError("cooperativeMatrixProperties: the adapter does not come from this binding (createGPU)");
  const ext = native.coop;
  if (!ext) return null;
  const handle = impl.handle as Parameters<typeof ext.zmAdapterCooperativeMatrixProperties>[0];
  const count = Number(ext.zmAdapterCooperativeMatrixProperties(handle, null, 0));
  if (count === 0) return [];
  const out = new Uint32Array(6 * count);
  ext.zmAdapterCooperativeMatrixProperties(handle, out as unknown as Parameters<typeof ext.zmAdapterCooperativeMatrixProperties>[1], count);
  const list: CoopMatrixConfig[] = [];
  for (let i = 0; i < count; i++) {
    const r = out.subarray(6 * i, 6 * i + 6);
    list.push({ M: r[0], N: r[1], K: r[2], abType: SCALARS[r[3]] ?? "f32", crType: SCALARS[r[4]] ?? "f32", saturatingAccumulation: r[5] !== 0 });
  }
  return list;
}

/** "16x16x16 f16→f32" style text of a configuration. */
export function formatCoopConfig(c: CoopMatrixConfig): string {
  return `${c.M}x${c.N}x${c.K} ${c.abType}→${c.crType}${c.saturatingAccumulation ? " (saturating)" : ""}`;
}
