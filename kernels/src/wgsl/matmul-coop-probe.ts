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

/** Where {@link coopFeedProbeWGSL} loads its fragments from. */
export type CoopFeedSource = "workgroup" | "storage";

/**
 * Throughput probe of the tensor-core kernel's multiply phase fed from memory, without any staging:
 * a workgroup of 16 subgroups (512 invocations) laid out 4 × 4 over a 128×256 block, each subgroup
 * per 16-deep step loading its 2 A fragments and 4 B fragments (the 128x256x32-4x4 tile's compute
 * loop of matmul-coop-wgsl.ts, same padded row strides 40 and 264 halves) and running the 8
 * coopMultiplyAdd into its accumulators, `iters` steps alternating between the two 16-column
 * halves of the 32-deep tile. "workgroup": the tiles sit in workgroup memory (filled once): the
 * bound of the staged kernels' multiply phase. "storage": the same tiles read from the storage
 * buffer `src` (24 KiB, L1-resident): the bound of the "none" staging. Bindings: 0 `src` (f16,
 * ≥ 128·40 + 32·264 halves), 1 `dst` (f32, 8·256 per subgroup). FLOPs per workgroup:
 * 16 · iters · 8 · 2·16³.
 */
export function coopFeedProbeWGSL(source: CoopFeedSource, iters: number): string {
  const SA = 128 * 40, SB = 32 * 264;
  const arr = source === "workgroup" ? "tile" : "src";
  const accs = Array.from({ length: 8 }, (_, q) => `  var c${q} = coop_mat16x16<f32, C>();`).join("\n");
  const mmas: string[] = [];
  for (let i = 0; i < 2; i++) for (let j = 0; j < 4; j++) mmas.push(`    c${i * 4 + j} = coopMultiplyAdd(a${i}, b${j}, c${i * 4 + j});`);
  return `enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read> src: array<f16>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
${source === "workgroup" ? `var<workgroup> tile: array<f16, ${SA + SB}>;\n` : ""}@compute @workgroup_size(512)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
${source === "workgroup" ? `  for (var e = li; e < ${SA + SB}u; e += 512u) { tile[e] = src[e]; }\n  workgroupBarrier();\n` : ""}  let sg = li / 32u;
  let wm = (sg / 4u) * 32u;
  let wn = (sg % 4u) * 64u;
${accs}
  for (var i = 0u; i < ${iters}u; i++) {
    let kk = (i & 1u) * 16u;
    let a0 = coopLoadT<coop_mat16x16<f16, A>>(&${arr}[(wm + 0u) * 40u + kk], 40u);
    let a1 = coopLoadT<coop_mat16x16<f16, A>>(&${arr}[(wm + 16u) * 40u + kk], 40u);
${[0, 1, 2, 3].map((j) => `    let b${j} = coopLoadT<coop_mat16x16<f16, B>>(&${arr}[${SA}u + kk * 264u + wn + ${16 * j}u], 264u);`).join("\n")}
${mmas.join("\n")}
  }
  let base = (wg.x * 16u + sg) * 2048u;
${Array.from({ length: 8 }, (_, q) => `  coopStoreT(c${q}, &dst[base + ${q * 256}u], 16u);`).join("\n")}
}
`;
}
