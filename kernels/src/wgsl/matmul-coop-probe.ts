/**
 * Throughput probe of the cooperative-matrix fragment configurations (kernels/bench/matmul-coop.ts):
 * register-only coopMultiplyAdd chains, no memory traffic in the loop, so the figure is what the
 * matrix units themselves deliver through WGSL (naga's `enable wgpu_cooperative_matrix;`).
 */

/** A cooperative-matrix configuration expressible in WGSL (naga 30): square 8 or 16, f16/f32. */
export interface CoopProbeShape {
  size: 8 | 16;
  ab: "f16" | "f32";
  cr: "f16" | "f32";
}

/**
 * Throughput probe of one fragment configuration: every subgroup loads one A and one B fragment
 * from `src` and runs `iters` × 4 independent coopMultiplyAdd chains (no memory traffic in the
 * loop), then stores the 4 accumulators to `dst` (subgroup-distinct, so nothing is eliminated).
 * Bindings: 0 `src` (2·size² elements of ab), 1 `dst` (f32/f16 array of ≥ 4·size²·8 per workgroup).
 * Workgroup 256 (8 subgroups of 32). FLOPs per workgroup: 8 · iters · 4 · 2·size³.
 */
export function coopProbeWGSL(s: CoopProbeShape, iters: number): string {
  const t = `coop_mat${s.size}x${s.size}`;
  const n2 = s.size * s.size;
  return `enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read> src: array<${s.ab}>;
@group(0) @binding(1) var<storage, read_write> dst: array<${s.cr}>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let a = coopLoadT<${t}<${s.ab}, A>>(&src[0], ${s.size}u);
  let b = coopLoadT<${t}<${s.ab}, B>>(&src[${n2}], ${s.size}u);
  var c0 = ${t}<${s.cr}, C>();
  var c1 = ${t}<${s.cr}, C>();
  var c2 = ${t}<${s.cr}, C>();
  var c3 = ${t}<${s.cr}, C>();
  for (var i = 0u; i < ${iters}u; i++) {
    c0 = coopMultiplyAdd(a, b, c0);
    c1 = coopMultiplyAdd(a, b, c1);
    c2 = coopMultiplyAdd(a, b, c2);
    c3 = coopMultiplyAdd(a, b, c3);
  }
  let base = (wg.x * 8u + li / 32u) * ${4 * n2}u;
  coopStoreT(c0, &dst[base], ${s.size}u);
  coopStoreT(c1, &dst[base + ${n2}u], ${s.size}u);
  coopStoreT(c2, &dst[base + ${2 * n2}u], ${s.size}u);
  coopStoreT(c3, &dst[base + ${3 * n2}u], ${s.size}u);
}
`;
}
