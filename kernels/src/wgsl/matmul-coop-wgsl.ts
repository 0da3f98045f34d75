/**
 * WGSL of the tensor-core matmul: naga's cooperative-matrix extension (`enable
 * wgpu_cooperative_matrix;`, types `coop_mat16x16<f16, A|B>` / `coop_mat16x16<f32, C>`, builtins
 * `coopLoad` (column-major) / `coopLoadT` (row-major) / `coopMultiplyAdd` / `coopStoreT`), which
 * naga lowers to SPIR-V's VK_KHR_cooperative_matrix (on NVIDIA: the tensor cores, as HMMA).
 * Only square 8×8 and 16×16 fragments are expressible in WGSL (naga 30), and only f16/f32 elements.
 *
 * Tiled kernel ({@link matmulCoopWGSL}): out[b] (+)= op(A[b])·op(B[b]), A/B f16 or f32 in memory
 * (f32 is rounded to f16 when staged, like autocast), f32 accumulation and output. A workgroup of
 * 256 invocations = 8 subgroups of 32 (NVIDIA's warp; the kernel assumes subgroup size 32) computes
 * a 128×128 block of out; the subgroups form a 2×4 grid, each owning 64×32 = 4×2 fragments of
 * 16×16. K advances 32 at a time: each invocation loads its 16 elements of the next A and B tiles
 * into registers (zero outside the matrix) while the tensor cores work on the current tiles in
 * workgroup memory, then stores them into the other of two buffers — double buffering with one
 * barrier per K step (the classic register-prefetch pipeline of CUTLASS's sm70-style GEMM, cf.
 * NVIDIA's "CUTLASS: Fast Linear Algebra in CUDA C++", 2017). Tiles keep the operand's own layout in
 * workgroup memory (rows padded by 8 halves), and the fragment load's layout (row- or column-major)
 * absorbs transposes. The epilogue goes through a 16×16 f32 scratch per subgroup so edges are
 * guarded and `accumulate` adds to out.
 *
 * `scaled` (f32 inputs): per-operand power-of-two scaling (matmul-coop-scale.ts) — the prologue
 * reduces the 2 × 256 partial maxima of binding `amax` to exponents kA, kB; staged values are
 * x·2^kA, y·2^kB before the rounding to f16, and the store multiplies by 2^−(kA+kB) (exact).
 */
import { COOP_AMAX_PARTIALS, COOP_SCALE_WGSL } from "./matmul-coop-scale.ts";

/** Options of {@link matmulCoopWGSL}. */
export interface CoopMatmulOptions {
  /** Element type of A and B in memory: "f16" (WGSL `array<f16>`) or "f32" (rounded to f16 when staged). */
  input: "f16" | "f32";
  transA: boolean;
  transB: boolean;
  /** out += result instead of out = result. */
  accumulate: boolean;
  /** "module" (default): a complete WGSL module with its own bindings; "kernel": the body for the
   * webgpu backend's Kernel (webgpu/kernel.ts adds `P` and the bindings `b_a`, `b_b`, `b_out`;
   * vec 1 only, since its bindings are scalar arrays). */
  mode?: "module" | "kernel";
  /** Elements per global load: 1 (any shape), or 4 (`array<vec4<…>>`: the operands' row lengths
   * (K or M for A, N or K for B), element offsets and batch strides must be multiples of 4). */
  vec?: 1 | 4;
  /** Per-operand power-of-two scaling before the rounding to f16 (input "f32" only; needs the
   * partial maxima of matmul-coop-scale.ts's coopAbsMaxLaunch in the extra binding `amax`). */
  scaled?: boolean;
}

/** Block shape of the tiled kernel. */
export const COOP_TILE = { BM: 128, BN: 128, BK: 32, WG: 256, SUBGROUP: 32, PAD: 8 } as const;

/** Uniform parameters of the tiled kernel, in order (all u32; element offsets and strides). */
export const COOP_PARAM_NAMES = ["M", "N", "K", "a_off", "b_off", "c_off", "stride_a", "stride_b", "stride_c", "batch"] as const;

/** Workgroup memory bytes the tiled kernel declares (two A and two B tiles of f16, 8 subgroup scratches of f32). */
export function coopWorkgroupBytes(o: Pick<CoopMatmulOptions, "transA" | "transB">): number {
  const { BM, BN, BK, PAD, WG, SUBGROUP } = COOP_TILE;
  const sa = o.transA ? BK * (BM + PAD) : BM * (BK + PAD);
  const sb = o.transB ? BN * (BK + PAD) : BK * (BN + PAD);
  return 2 * 2 * (sa + sb) + (WG / SUBGROUP) * 256 * 4;
}

/** A stable key naming every choice that changes the WGSL. */
export function coopKernelKey(o: CoopMatmulOptions): string {
  return `${o.mode === "kernel" ? "mmc" : "matmul_coop"}_${o.input}${o.vec === 4 ? "x4" : ""}_${o.transA ? "t" : "n"}${o.transB ? "t" : "n"}${o.accumulate ? "_acc" : ""}${o.scaled ? "_scaled" : ""}`;
}

/**
 * The complete WGSL module of the tiled cooperative-matrix matmul. Bindings: 0 uniform params
 * ({@link COOP_PARAM_NAMES}), 1 A, 2 B (`array<f16>` or `array<f32>`), 3 out (`array<f32>`), and
 * with `scaled` 4 amax (`array<u32>`, 2 × 256 partial maxima, matmul-coop-scale.ts).
 * Dispatch ceil(N/128) × ceil(M/128) × batch workgroups. Needs the device features
 * "shader-f16" and "wgpu-cooperative-matrix" (16×16×16 f16→f32 offered by the driver), subgroup
 * size 32, and {@link coopWorkgroupBytes} of workgroup memory.
 */
export function matmulCoopWGSL(o: CoopMatmulOptions): string {
  const { BM, BN, BK, WG, SUBGROUP, PAD } = COOP_TILE;
  const scaled = !!o.scaled;
  if (scaled && o.input !== "f32") throw new Error("matmulCoopWGSL: scaled needs input f32 (f16 operands are already rounded)");
  if (scaled && COOP_AMAX_PARTIALS !== WG) throw new Error("matmulCoopWGSL: the prologue reads one partial per invocation");
  const SA_LD = o.transA ? BM + PAD : BK + PAD;
  const SA = o.transA ? BK * SA_LD : BM * SA_LD;
  const SB_LD = o.transB ? BK + PAD : BN + PAD;
  const SB = o.transB ? BN * SB_LD : BK * SB_LD;
  const V = o.vec ?? 1; // elements per global load (1, or 4 when rows and offsets are multiples of 4)
  const PER = (BM * BK) / WG / V; // loads of each tile per invocation (16 scalar or 4 vec4)
  const elt = V === 1 ? o.input : `vec4<${o.input}>`;
  const reg = V === 1 ? "f16" : "vec4<f16>";
  const zero = V === 1 ? "0.0h" : "vec4<f16>()";
  const cvt = (x: string, mat: "a" | "b") => (o.input === "f16" ? x : scaled ? `${reg}(${x} * scale_${mat})` : `${reg}(${x})`);
  // Tiles are staged in the operand's stored orientation. Tile of A: !transA: A [M, K] → rows m
  // (BM) × columns k (BK); transA: A [K, M] → rows k (BK) × columns m (BM). B: !transB: [K, N] →
  // rows k × columns n; transB: [N, K] → rows n × columns k. Invocation li loads, on pass i, the
  // V elements at row li / (cols/V) + i·(WG·V/cols), column (li % (cols/V))·V.
  const aCols = o.transA ? BM : BK;
  const bCols = o.transB ? BK : BN;
  const stage = (mat: "a" | "b", i: number): { load: string; store: string } => {
    const cols = mat === "a" ? aCols : bCols;
    const step = (i * WG * V) / cols;
    const [rowVar, colVar] = mat === "a" ? ["ar", "ac"] : ["br", "bc"];
    // (stored row, stored column) → (origin, bound, leading dimension) per layout
    const layout = mat === "a"
      ? (o.transA ? { r0: "k0", rb: "P.K", c0: "m0", cb: "P.M", ld: "P.M" } : { r0: "m0", rb: "P.M", c0: "k0", cb: "P.K", ld: "P.K" })
      : (o.transB ? { r0: "n0", rb: "P.N", c0: "k0", cb: "P.K", ld: "P.K" } : { r0: "k0", rb: "P.K", c0: "n0", cb: "P.N", ld: "P.N" });
    const base = mat === "a" ? "a_base" : "b_base";
    const idx = `${base} + r * ${layout.ld} + c`;
    const at = V === 1 ? `mat_${mat}[${idx}]` : `mat_${mat}[(${idx}) / 4u]`;
    const load = `    { let r = ${layout.r0} + ${rowVar} + ${step}u; let c = ${layout.c0} + ${colVar}; r${mat}[${i}] = select(${zero}, ${cvt(at, mat)}, r < ${layout.rb} && c < ${layout.cb}); }`;
    const ld = mat === "a" ? SA_LD : SB_LD;
    const size = mat === "a" ? SA : SB;
    const dst = `s${mat}[buf * ${size}u + (${rowVar} + ${step}u) * ${ld}u + ${colVar}`;
    const store = V === 1
      ? `    ${dst}] = r${mat}[${i}];`
      : ["x", "y", "z", "w"].map((q, j) => `    ${dst} + ${j}u] = r${mat}[${i}].${q};`).join("\n");
    return { load, store };
  };
  const loadA: string[] = [];
  const storeA: string[] = [];
  const loadB: string[] = [];
  const storeB: string[] = [];
  for (let i = 0; i < PER; i++) {
    const a = stage("a", i), b = stage("b", i);
    loadA.push(a.load);
    storeA.push(a.store);
    loadB.push(b.load);
    storeB.push(b.store);
  }
  // Fragment loads for the subgroup's 4 (m) × 2 (n) fragments at k offset kk within the tile.
  const fragA = (i: number, kk: number) =>
    o.transA
      ? `coopLoad<coop_mat16x16<f16, A>>(&sa[sa0 + ${kk * SA_LD}u + wm + ${i * 16}u], ${SA_LD}u)`
      : `coopLoadT<coop_mat16x16<f16, A>>(&sa[sa0 + (wm + ${i * 16}u) * ${SA_LD}u + ${kk}u], ${SA_LD}u)`;
  const fragB = (j: number, kk: number) =>
    o.transB
      ? `coopLoad<coop_mat16x16<f16, B>>(&sb[sb0 + (wn + ${j * 16}u) * ${SB_LD}u + ${kk}u], ${SB_LD}u)`
      : `coopLoadT<coop_mat16x16<f16, B>>(&sb[sb0 + ${kk * SB_LD}u + wn + ${j * 16}u], ${SB_LD}u)`;
  const compute: string[] = [];
  for (let kk = 0; kk < BK; kk += 16) {
    compute.push(`    {`);
    for (let i = 0; i < 4; i++) compute.push(`      let a${i} = ${fragA(i, kk)};`);
    for (let j = 0; j < 2; j++) compute.push(`      let b${j} = ${fragB(j, kk)};`);
    for (let i = 0; i < 4; i++) for (let j = 0; j < 2; j++) compute.push(`      c${i}${j} = coopMultiplyAdd(a${i}, b${j}, c${i}${j});`);
    compute.push(`    }`);
  }
  const epilogue: string[] = [];
  for (let i = 0; i < 4; i++) {
    for (let j = 0; j < 2; j++) {
      epilogue.push(`  coopStoreT(c${i}${j}, &so[sg * 256u], 16u);`);
      epilogue.push(`  workgroupBarrier();`);
      epilogue.push(`  for (var e = lane; e < 256u; e += ${SUBGROUP}u) {`);
      epilogue.push(`    let m = m0 + wm + ${i * 16}u + e / 16u; let n = n0 + wn + ${j * 16}u + e % 16u;`);
      epilogue.push(`    if (m < P.M && n < P.N) { let o = c_base + m * P.N + n; out[o] = ${o.accumulate ? "out[o] + " : ""}so[sg * 256u + e]${scaled ? " * out_s1 * out_s2" : ""}; }`);
      epilogue.push(`  }`);
      epilogue.push(`  workgroupBarrier();`);
    }
  }
  // Scaled: reduce the 256 partial maxima of A (amax[0..256)) and of B (amax[256..512)) in the
  // epilogue scratch (free until the epilogue; finite non-negative values, so f32 max = bit max, and
  // a subnormal flushed to 0 gives the same clamp exponent), then the exponents and factors.
  const prologue = `  so[li] = bitcast<f32>(amax[li]);
  so[${WG}u + li] = bitcast<f32>(amax[${WG}u + li]);
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (li < s) {
      so[li] = max(so[li], so[li + s]);
      so[${WG}u + li] = max(so[${WG}u + li], so[${WG}u + li + s]);
    }
    workgroupBarrier();
  }
  let ka = coop_scale_exp(bitcast<u32>(so[0]));
  let kb = coop_scale_exp(bitcast<u32>(so[${WG}u]));
  let scale_a = coop_pow2(ka);
  let scale_b = coop_pow2(kb);
  let out_h = (ka + kb) / 2;
  let out_s1 = coop_pow2(-out_h);
  let out_s2 = coop_pow2(out_h - ka - kb);
  workgroupBarrier();
`;
  const accs: string[] = [];
  for (let i = 0; i < 4; i++) for (let j = 0; j < 2; j++) accs.push(`  var c${i}${j} = coop_mat16x16<f32, C>();`);
  const module = `enable f16;
enable wgpu_cooperative_matrix;
// ${coopKernelKey(o)}: tensor-core matmul, ${BM}x${BN}x${BK} blocks, 8 subgroups of ${SUBGROUP}, double-buffered staging
struct Params {
${COOP_PARAM_NAMES.map((n) => `  ${n}: u32,`).join("\n")}
};
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> mat_a: array<${elt}>;
@group(0) @binding(2) var<storage, read> mat_b: array<${elt}>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
${scaled ? "@group(0) @binding(4) var<storage, read> amax: array<u32>;\n" : ""}var<workgroup> sa: array<f16, ${2 * SA}>;
var<workgroup> sb: array<f16, ${2 * SB}>;
var<workgroup> so: array<f32, ${(WG / SUBGROUP) * 256}>;
${scaled ? COOP_SCALE_WGSL : ""}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let m0 = wg.y * ${BM}u;
  let n0 = wg.x * ${BN}u;
  let a_base = P.a_off + wg.z * P.stride_a;
  let b_base = P.b_off + wg.z * P.stride_b;
  let c_base = P.c_off + wg.z * P.stride_c;
  let sg = li / ${SUBGROUP}u;
  let lane = li % ${SUBGROUP}u;
  let wm = (sg / 4u) * 64u;
  let wn = (sg % 4u) * 32u;
  let ar = li / ${aCols / V}u;
  let ac = (li % ${aCols / V}u) * ${V}u;
  let br = li / ${bCols / V}u;
  let bc = (li % ${bCols / V}u) * ${V}u;
${scaled ? prologue : ""}  var ra: array<${reg}, ${PER}>;
  var rb: array<${reg}, ${PER}>;
${accs.join("\n")}
  let nk = (P.K + ${BK - 1}u) / ${BK}u;
  var k0 = 0u;
  var buf = 0u;
${loadA.join("\n")}
${loadB.join("\n")}
${storeA.join("\n")}
${storeB.join("\n")}
  workgroupBarrier();
  for (var t = 0u; t < nk; t++) {
    let has_next = t + 1u < nk;
    k0 = (t + 1u) * ${BK}u;
    if (has_next) {
${loadA.map((l) => "  " + l).join("\n")}
${loadB.map((l) => "  " + l).join("\n")}
    }
    let sa0 = buf * ${SA}u;
    let sb0 = buf * ${SB}u;
${compute.join("\n")}
    buf = 1u - buf;
    if (has_next) {
${storeA.map((l) => "  " + l).join("\n")}
${storeB.map((l) => "  " + l).join("\n")}
    }
    workgroupBarrier();
  }
${epilogue.join("\n")}
}
`;
  if ((o.mode ?? "module") === "module") return module;
  if (V !== 1) throw new Error("matmulCoopWGSL: kernel mode needs vec 1 (the backend binds scalar arrays)");
  // drop the module's own Params and bindings; the backend's assembler declares P, b_a, b_b, b_out
  return module
    .replace(/struct Params \{[^}]*\};\n/, "")
    .replace(/^@group\(0\).*\n/gm, "")
    .replace(/\bmat_a\[/g, "b_a[")
    .replace(/\bmat_b\[/g, "b_b[")
    .replace(/\bout\[/g, "b_out[")
    .replace(/\bamax\[/g, "b_amax[");
}

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
