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
 */

/** Options of {@link matmulCoopWGSL}. */
export interface CoopMatmulOptions {
  /** Element type of A and B in memory: "f16" (WGSL `array<f16>`) or "f32" (rounded to f16 when staged). */
  input: "f16" | "f32";
  transA: boolean;
  transB: boolean;
  /** out += result instead of out = result. */
  accumulate: boolean;
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
  return `matmul_coop_${o.input}_${o.transA ? "t" : "n"}${o.transB ? "t" : "n"}${o.accumulate ? "_acc" : ""}`;
}

/**
 * The complete WGSL module of the tiled cooperative-matrix matmul. Bindings: 0 uniform params
 * ({@link COOP_PARAM_NAMES}), 1 A, 2 B (`array<f16>` or `array<f32>`), 3 out (`array<f32>`).
 * Dispatch ceil(N/128) × ceil(M/128) × batch workgroups. Needs the device features
 * "shader-f16" and "wgpu-cooperative-matrix" (16×16×16 f16→f32 offered by the driver), subgroup
 * size 32, and {@link coopWorkgroupBytes} of workgroup memory.
 */
export function matmulCoopWGSL(o: CoopMatmulOptions): string {
  const { BM, BN, BK, WG, SUBGROUP, PAD } = COOP_TILE;
  const SA_LD = o.transA ? BM + PAD : BK + PAD;
  const SA = o.transA ? BK * SA_LD : BM * SA_LD;
  const SB_LD = o.transB ? BK + PAD : BN + PAD;
  const SB = o.transB ? BN * SB_LD : BK * SB_LD;
  const PER = (BM * BK) / WG; // elements of each tile per invocation (16)
  const cvt = o.input === "f16" ? (x: string) => x : (x: string) => `f16(${x})`;
  // Per-invocation element i of the A tile: fast dimension = the stored rows' contiguous one.
  // !transA: A [M, K], tile rows m (BM) × cols k (BK); transA: A [K, M], tile rows k (BK) × cols m (BM).
  const aCols = o.transA ? BM : BK;
  const bCols = o.transB ? BK : BN;
  const loadA: string[] = [];
  const storeA: string[] = [];
  const loadB: string[] = [];
  const storeB: string[] = [];
  for (let i = 0; i < PER; i++) {
    const rowStepA = (i * WG) / aCols;
    const rowStepB = (i * WG) / bCols;
    if (o.transA) {
      // stored row = k (k0 + r), column = m (m0 + c)
      loadA.push(`    { let k = k0 + ar + ${rowStepA}u; let m = m0 + ac; ra[${i}] = select(0.0h, ${cvt("mat_a[a_base + k * P.M + m]")}, k < P.K && m < P.M); }`);
    } else {
      loadA.push(`    { let m = m0 + ar + ${rowStepA}u; let k = k0 + ac; ra[${i}] = select(0.0h, ${cvt("mat_a[a_base + m * P.K + k]")}, m < P.M && k < P.K); }`);
    }
    storeA.push(`    sa[buf * ${SA}u + (ar + ${rowStepA}u) * ${SA_LD}u + ac] = ra[${i}];`);
    if (o.transB) {
      // B [N, K]: stored row = n, column = k
      loadB.push(`    { let n = n0 + br + ${rowStepB}u; let k = k0 + bc; rb[${i}] = select(0.0h, ${cvt("mat_b[b_base + n * P.K + k]")}, n < P.N && k < P.K); }`);
    } else {
      loadB.push(`    { let k = k0 + br + ${rowStepB}u; let n = n0 + bc; rb[${i}] = select(0.0h, ${cvt("mat_b[b_base + k * P.N + n]")}, k < P.K && n < P.N); }`);
    }
    storeB.push(`    sb[buf * ${SB}u + (br + ${rowStepB}u) * ${SB_LD}u + bc] = rb[${i}];`);
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
      epilogue.push(`    if (m < P.M && n < P.N) { let o = c_base + m * P.N + n; out[o] = ${o.accumulate ? "out[o] + " : ""}so[sg * 256u + e]; }`);
      epilogue.push(`  }`);
      epilogue.push(`  workgroupBarrier();`);
    }
  }
  const accs: string[] = [];
  for (let i = 0; i < 4; i++) for (let j = 0; j < 2; j++) accs.push(`  var c${i}${j} = coop_mat16x16<f32, C>();`);
  return `enable f16;
enable wgpu_cooperative_matrix;
// ${coopKernelKey(o)}: tensor-core matmul, ${BM}x${BN}x${BK} blocks, 8 subgroups of ${SUBGROUP}, double-buffered staging
struct Params {
${COOP_PARAM_NAMES.map((n) => `  ${n}: u32,`).join("\n")}
};
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> mat_a: array<${o.input}>;
@group(0) @binding(2) var<storage, read> mat_b: array<${o.input}>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
var<workgroup> sa: array<f16, ${2 * SA}>;
var<workgroup> sb: array<f16, ${2 * SB}>;
var<workgroup> so: array<f32, ${(WG / SUBGROUP) * 256}>;

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
  let ar = li / ${aCols}u;
  let ac = li % ${aCols}u;
  let br = li / ${bCols}u;
  let bc = li % ${bCols}u;
  var ra: array<f16, ${PER}>;
  var rb: array<f16, ${PER}>;
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
