/**
 * Small builders shared by the kernel families: parameter declaration lists, the standard entry
 * point signature, and the f32/i32/u32/16-bit bind types of dtypes.
 */
import type { DType } from "../backend.ts";
import type { BindType, Kernel, ParamDecl } from "../webgpu/kernel.ts";

/** Workgroup size of one-element-per-invocation kernels. */
export const EW_WG = 256;
/** Workgroup size of one-row-per-workgroup kernels (softmax, norms, cross-entropy, reduce). */
export const ROW_WG = 64;

/** `u32` parameter declarations for the given names. */
export function u32s(...names: string[]): ParamDecl[] {
  return names.map((name) => ({ name, type: "u32" as const }));
}

/** `f32` parameter declarations for the given names. */
export function f32s(...names: string[]): ParamDecl[] {
  return names.map((name) => ({ name, type: "f32" as const }));
}

/** Entry point header with workgroup size `wg`; the body sees `wg`, `nwg` (vec3 workgroup id and
 * count) and `li` (local invocation index). */
export function entry(wgSize: number): string {
  return `@compute @workgroup_size(${wgSize}) fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32)`;
}

/** WGSL bind type of a dtype: 16-bit floats are packed words. */
export function bindTypeOf(dtype: DType): BindType {
  return dtype === "f16" || dtype === "bf16" ? "w16" : dtype;
}

/** Workgroups needed for `n` invocations of `wgSize`. */
export function groups(n: number, wgSize: number = EW_WG): number {
  return Math.ceil(n / wgSize);
}

const kernelMemo = new Map<string, Kernel>();

/**
 * The kernel whose label is `label`, built by `build` on first use and reused afterwards (so the
 * WGSL strings are generated once, and the backend's caches can key on the object). Labels must
 * therefore name every choice that changes the WGSL (op, dtypes, rank, head dim…); throws if a
 * fresh build's label disagrees with the key.
 */
export function memoKernel(label: string, build: () => Kernel): Kernel {
  const hit = kernelMemo.get(label);
  if (hit) return hit;
  const k = build();
  if (k.label !== label) throw new Error(`memoKernel: kernel built for "${label}" is labelled "${k.label}"`);
  kernelMemo.set(label, k);
  return k;
}
