/**
 * WGSL of the tensor-core matmul: naga's cooperative-matrix extension (`enable
 * wgpu_cooperative_matrix;`, types `coop_mat16x16<f16, A|B>` / `coop_mat16x16<f32, C>`, builtins
 * `coopLoad` (column-major) / `coopLoadT` (row-major) / `coopMultiplyAdd` / `coopStoreT`), which
 * naga lowers to SPIR-V's VK_KHR_cooperative_matrix (on NVIDIA: the tensor cores, as HMMA).
 * Only square 8×8 and 16×16 fragments are expressible in WGSL (naga 30), and only f16/f32 elements.
 *
 * Tiled kernel ({@link matmulCoopWGSL}): out[b] (+)= op(A[b])·op(B[b]), A/B f16 or f32 in memory
 * (f32 is rounded to f16 when staged, like autocast), f32 accumulation and output. The block shape
 * is a {@link CoopTile} (matmul-coop-tile.ts; default 128×128×32, 8 subgroups of 32 as 2×4, each
 * 4×2 fragments of 16×16, two stages). Each K step, every invocation loads its share of the next
 * A and B tiles into registers (guarded: zero outside the matrix, nothing read out of range) while
 * the tensor cores work on the current tiles in workgroup memory, then stores them into workgroup
 * memory — with two stages into the other buffer (one barrier per step), with one stage after a
 * barrier (two per step): the register-prefetch pipeline of CUTLASS's sm70-style GEMM (NVIDIA,
 * "CUTLASS: Fast Linear Algebra in CUDA C++", 2017). Tiles keep the operand's own layout in
 * workgroup memory (rows padded by 8 halves), and the fragment load's layout (row- or
 * column-major) absorbs transposes.
 *
 * Epilogue: "scratch" goes through a 16×16 f32 scratch per subgroup so any edge is guarded and
 * `accumulate` adds to out element by element; "direct" stores each accumulator fragment straight
 * into out with coopStoreT (after adding the fragment loaded from out when accumulating), which is
 * only correct when every fragment lies wholly inside or wholly outside out and out is 16-byte
 * aligned: M and N multiples of 16, c_off and the batch stride of out multiples of 4 (the caller
 * checks; matmul-coop.ts does).
 *
 * `scaled` (f32 inputs): per-operand power-of-two scaling (matmul-coop-scale.ts) — the prologue
 * reduces the 2 × 256 partial maxima of binding `amax` to exponents kA, kB; staged values are
 * x·2^kA, y·2^kB before the rounding to f16, and the store multiplies by 2^−(kA+kB) (exact).
 *
 * `emulate`: the same kernel with every cooperative-matrix type and builtin replaced by plain WGSL
 * (accumulators spread over the lanes like the real ones, f16 products summed in f32; see
 * emulationWGSL), so the tiling, staging, guards and epilogues can be tested on a device without
 * the feature (lavapipe). For tests only.
 */
import { COOP_AMAX_PARTIALS, COOP_SCALE_WGSL } from "./matmul-coop-scale.ts";
import {
  COOP_DEFAULT_TILE,
  COOP_FRAG,
  COOP_SUBGROUP,
  coopStageLdA,
  coopStageLdB,
  coopStageSizes,
  coopTileFragments,
  coopTileName,
  coopTileProblem,
  coopTileThreads,
  type CoopTile,
} from "./matmul-coop-tile.ts";

export { coopProbeWGSL, type CoopProbeShape } from "./matmul-coop-probe.ts";

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
  /** Elements per global load: 1 (any shape), 4 (`array<vec4<…>>`: the operands' row lengths
   * (K or M for A, N or K for B), element offsets and batch strides must be multiples of 4), or 8
   * (input "f16" only: 16-byte loads from `array<vec4<u32>>`, unpacked with unpack2x16float since
   * naga 30 types bitcast<vec2<f16>>(u32) as f32; rows, offsets and strides multiples of 8 halves). Only the "regs" staging loads vectors; "coop" and "none" use fragment loads. */
  vec?: 1 | 4 | 8;
  /** How vec 8 (16-byte) loads are typed: "u32" (default: `array<vec4<u32>>`, each pair of halves
   * unpacked with unpack2x16float and converted back to f16 before its workgroup store) or
   * "mat2x4" (`array<mat2x4<f16>>`: two vec4<f16> columns per 16 bytes, stored as they are — no
   * f16↔f32 conversion per half; naga 30 cannot bitcast u32 to vec2<f16>). */
  vec8Type?: "u32" | "mat2x4";
  /** How operand tiles reach the multiply (default "regs"):
   * - "regs": each invocation loads its share of the next A and B tiles into registers (vectors
   *   of `vec`, guarded) while the current tiles are multiplied, then stores them into workgroup
   *   memory one half at a time (the register-prefetch pipeline; any shape).
   * - "coop": each subgroup loads whole 16×16 fragments of the next tiles straight from memory
   *   (`coopLoad` on the storage buffer, as wide as the driver makes it) while the current ones are
   *   multiplied, then writes them to workgroup memory with `coopStore` — no per-half stores.
   * - "none": no workgroup memory; every subgroup loads its own A and B fragments from memory (L1)
   *   one 16-deep K step ahead of the multiply (no barriers in the K loop).
   * "coop" and "none" read unguarded whole fragments: input "f16" (bound as `array<f16>`), and every
   * fragment the block touches must lie in the operands (the stored rows and columns padded to the
   * block: M to BM, N to BN, K to BK; the packed operands of matmul-coop-pack.ts are). */
  staging?: CoopStaging;
  /** "kernel" mode, input "f16": the operands are packed copies (matmul-coop-pack.ts) with their own
   * row lengths, the extra params {@link COOP_PACKED_PARAM_NAMES} (lda, ldb: halves per stored
   * row; scale_mask: bit 0 / bit 1 = A / B was scaled by its power of two when packed, so the
   * result is scaled back by it — needs `scaled`). */
  packed?: boolean;
  /** Per-operand power-of-two scaling before the rounding to f16 (input "f32" only; needs the
   * partial maxima of matmul-coop-scale.ts's coopAbsMaxLaunch in the extra binding `amax`). */
  scaled?: boolean;
  /** Block shape (default {@link COOP_DEFAULT_TILE}). */
  tile?: CoopTile;
  /** "scratch" (default; any shape) or "direct" (M, N multiples of 16, out offset and batch stride
   * multiples of 4; see the file comment). */
  epilogue?: "scratch" | "direct";
  /** Plain-WGSL stand-ins for the cooperative-matrix builtins (tests on devices without them). */
  emulate?: boolean;
  /** How global reads outside the matrix are avoided: "select" (default: every invocation loads,
   * from element 0 when out of range, and selects zero — branch-free, the form closest to the
   * kernel measured before guards were selectable) or "branch" (the load sits in an `if`; the
   * form of the fastest H200 measurement, docs/performance.md). Both read nothing out of range. */
  guard?: "branch" | "select";
  /** Grouped products over row segments (MoE experts; "kernel" mode, "scratch" epilogue only; see
   * {@link CoopGroupedMode}). Absent: the dense (batched) matmul. */
  grouped?: CoopGroupedMode;
}

/**
 * The grouped modes of the tensor-core matmul (MoE experts; kernels/src/wgsl/grouped-matmul-coop.ts
 * launches them): G groups of rows given by G + 1 i32 row offsets in the binding `b_off` from
 * element `P.off_off`, each clamped to [0, P.R]; group g has rows [s0, s1), s0 = off(g),
 * s1 = max(off(g + 1), s0), so a group whose end lies below its start is empty — the same contract
 * as the FMA kernel's grouped modes (matmul-fast-wgsl.ts MatmulGroupedMode). Offsets must be
 * non-decreasing (not checked on the device); decreasing ones give overlapping groups (rows written
 * by more than one, or by none), never a read or write outside the operands.
 * - "rows" (forward / dX): out[rows_g] (+)= A[rows_g]·op(B_g), A [R, K] (not transA), B_g at
 *   b_off + g·stride_b ([K, N], or [N, K] with transB), out [R, N]. Workgroup row index wg.y is a
 *   row-tile slot (⌈R/BM⌉ + G of them); a slot finds its group and rows [r0, r1), r1 − r0 ≤ BM,
 *   by scanning the offsets, and is then a dense tile of M = r1 − r0 rows. A slot past the last
 *   group runs with M = 0 and no K steps, writing nothing. It does not return early: naga's
 *   uniformity analysis counts a value computed in a loop (a `var`) as non-uniform, and
 *   cooperative-matrix operations after a return under such a condition fail validation.
 * - "wgrad" (weight gradient): out_g [M, N] (+)= A[rows_g]ᵀ·B[rows_g] with wg.z = g (batch G, out
 *   stride stride_c), transA (A = dy [R, M]), not transB (B = x [R, N]); the K loop runs over the
 *   group's rows, so an empty group writes zeros (or leaves out unchanged when accumulating).
 */
export type CoopGroupedMode = "rows" | "wgrad";

/** Extra uniform parameters of the grouped modes, after {@link COOP_PARAM_NAMES}: groups, rows
 * (offsets are clamped to it), element offset of the G + 1 offsets in `b_off`. */
export const COOP_GROUPED_PARAM_NAMES = ["G", "R", "off_off"] as const;

/** Extra uniform parameters of packed operands (after the grouped ones when grouped). */
export const COOP_PACKED_PARAM_NAMES = ["lda", "ldb", "scale_mask"] as const;

/** How operand tiles reach the multiply (see {@link CoopMatmulOptions.staging}). */
export type CoopStaging = "regs" | "coop" | "none";

/** WGSL of a workgroup's place in the product: the bounds dim_m, dim_n, dim_k, the output block's
 * origin m0, n0, and the operands' bases a_base, b_base, c_base (see {@link CoopGroupedMode}). */
function placement(grouped: CoopGroupedMode | undefined, BM: number, BN: number): string {
  if (!grouped) {
    return `  let dim_m = P.M; let dim_n = P.N; let dim_k = P.K;
  let m0 = wg.y * ${BM}u;
  let n0 = wg.x * ${BN}u;
  let a_base = P.a_off + wg.z * P.stride_a;
  let b_base = P.b_off + wg.z * P.stride_b;
  let c_base = P.c_off + wg.z * P.stride_c;`;
  }
  if (grouped === "wgrad") {
    return `  let grp = wg.z;
  let s0 = coop_off(grp); let s1 = max(coop_off(grp + 1u), s0);
  let dim_m = P.M; let dim_n = P.N; let dim_k = s1 - s0;
  let m0 = wg.y * ${BM}u;
  let n0 = wg.x * ${BN}u;
  let a_base = P.a_off + s0 * lda;
  let b_base = P.b_off + s0 * ldb;
  let c_base = P.c_off + grp * P.stride_c;`;
  }
  return `  // row-tile slot wg.y → group grp and its rows [r0, r1); a slot past the last group keeps grp = G
  var grp = P.G; var r0 = 0u; var r1 = 0u; var seen = 0u;
  for (var h = 0u; h < P.G; h++) {
    let s0 = coop_off(h); let s1 = max(coop_off(h + 1u), s0); let nt = (s1 - s0 + ${BM - 1}u) / ${BM}u;
    if (grp == P.G && wg.y < seen + nt) { grp = h; r0 = s0 + (wg.y - seen) * ${BM}u; r1 = min(r0 + ${BM}u, s1); }
    seen += nt;
  }
  let dim_m = r1 - r0; let dim_n = P.N; let dim_k = select(0u, P.K, grp < P.G);
  let m0 = 0u;
  let n0 = wg.x * ${BN}u;
  let a_base = P.a_off + r0 * lda;
  let b_base = P.b_off + min(grp, P.G - 1u) * P.stride_b;
  let c_base = P.c_off + r0 * P.N;`;
}

/** Block shape of the default tile (as the backend's launches use it). */
export const COOP_TILE = { BM: COOP_DEFAULT_TILE.BM, BN: COOP_DEFAULT_TILE.BN, BK: COOP_DEFAULT_TILE.BK, WG: coopTileThreads(COOP_DEFAULT_TILE), SUBGROUP: COOP_SUBGROUP } as const;

/** Uniform parameters of the tiled kernel, in order (all u32; element offsets and strides). */
export const COOP_PARAM_NAMES = ["M", "N", "K", "a_off", "b_off", "c_off", "stride_a", "stride_b", "stride_c", "batch"] as const;

/** f32 elements of the kernel's scratch: 256 per subgroup for the "scratch" epilogue, 2 per
 * invocation for the scaled prologue's reduction (the larger of the two; 0 when neither). */
function scratchFloats(o: Pick<CoopMatmulOptions, "tile" | "epilogue" | "scaled">): number {
  const t = o.tile ?? COOP_DEFAULT_TILE;
  const wg = coopTileThreads(t);
  return Math.max((o.epilogue ?? "scratch") === "scratch" ? (wg / COOP_SUBGROUP) * COOP_FRAG * COOP_FRAG : 0, o.scaled ? 2 * wg : 0);
}

/** Workgroup memory bytes the tiled kernel declares: `stages` A and B tiles of f16 plus the f32
 * scratch (256 per subgroup with the "scratch" epilogue; 2 per invocation when scaled). */
export function coopWorkgroupBytes(o: Pick<CoopMatmulOptions, "transA" | "transB" | "tile" | "epilogue" | "scaled" | "staging">): number {
  const t = o.tile ?? COOP_DEFAULT_TILE;
  const { SA, SB } = coopStageSizes(t, o.transA, o.transB);
  return (o.staging === "none" ? 0 : 2 * t.stages * (SA + SB)) + 4 * scratchFloats(o);
}

/** A stable key naming every choice that changes the WGSL. The default tile and epilogue keep
 * the names they had before tiles were selectable. */
export function coopKernelKey(o: CoopMatmulOptions): string {
  const t = o.tile ?? COOP_DEFAULT_TILE;
  const tile = coopTileName(t) === coopTileName(COOP_DEFAULT_TILE) ? "" : `_${coopTileName(t).replace(/-/g, "_")}`;
  return `${o.mode === "kernel" ? "mmc" : "matmul_coop"}_${o.input}${o.vec === 4 ? "x4" : o.vec === 8 ? (o.vec8Type === "mat2x4" ? "x8m" : "x8") : ""}_${o.transA ? "t" : "n"}${o.transB ? "t" : "n"}${o.accumulate ? "_acc" : ""}${o.scaled ? "_scaled" : ""}${tile}${o.epilogue === "direct" ? "_direct" : ""}${o.guard === "branch" ? "_br" : ""}${o.grouped ? `_grp${o.grouped}` : ""}${o.staging && o.staging !== "regs" ? `_st${o.staging}` : ""}${o.packed ? "_pk" : ""}${o.emulate ? "_emu" : ""}`;
}

/** How the kernel spells the cooperative-matrix operations: the real builtins or the emulation. */
interface CoopOps {
  zeroC: string;
  /** Fragment load from array `arr` at element `idx` with row stride `ld`; `role` A/B (f16) or C (f32). */
  load(role: "A" | "B" | "C", arr: string, idx: string, ld: string, rowMajor: boolean): string;
  mma(a: string, b: string, c: string): string;
  /** Row-major store of accumulator `c` into `arr` at `idx`, row stride `ld` (a statement). */
  store(c: string, arr: string, idx: string, ld: string): string;
  scale(c: string, s: string): string;
  add(c: string, d: string): string;
  /** Store of an A (`mat` "a") or B fragment `f` into workgroup tile `arr` at `idx`, row stride
   * `ld`, layout `rowMajor` (a statement; the "coop" staging). */
  storeAB(mat: "a" | "b", f: string, arr: string, idx: string, ld: string, rowMajor: boolean): string;
}

const REAL_OPS: CoopOps = {
  zeroC: "coop_mat16x16<f32, C>()",
  load: (role, arr, idx, ld, rowMajor) => `coopLoad${rowMajor ? "T" : ""}<coop_mat16x16<${role === "C" ? "f32" : "f16"}, ${role}>>(&${arr}[${idx}], ${ld})`,
  mma: (a, b, c) => `coopMultiplyAdd(${a}, ${b}, ${c})`,
  store: (c, arr, idx, ld) => `coopStoreT(${c}, &${arr}[${idx}], ${ld});`,
  scale: (c, s) => `(${c} * ${s})`,
  add: (c, d) => `(${c} + ${d})`,
  storeAB: (_mat, f, arr, idx, ld, rowMajor) => `coopStore${rowMajor ? "T" : ""}(${f}, &${arr}[${idx}], ${ld});`,
};

const EMU_OPS: CoopOps = {
  zeroC: "EmuC()",
  load: (role, arr, idx, ld, rowMajor) => (role === "C" ? `emu_ld_${arr}(${idx}, ${ld}, lane)` : `EmuRef(${idx}, ${ld}, ${rowMajor})`),
  mma: (a, b, c) => `emu_mma(${a}, ${b}, ${c}, lane)`,
  store: (c, arr, idx, ld) => `emu_st_${arr}(${c}, ${idx}, ${ld}, lane);`,
  scale: (c, s) => `emu_scale(${c}, ${s})`,
  add: (c, d) => `emu_add(${c}, ${d})`,
  storeAB: (mat, f, _arr, idx, ld, rowMajor) => `emu_cp_${mat}(${f}, ${idx}, ${ld}, ${rowMajor}, lane);`,
};

/**
 * The emulation's types and functions. An accumulator fragment is spread over the 32 lanes of a
 * subgroup like the real one (lane l holds elements l, l + 32, …: 8 of the 256); an A or B
 * fragment is a reference (EmuRef: start, row stride, layout) into `sa` / `sb`, read when
 * multiplied — the kernel multiplies its fragments before it next writes the staged tiles, so the
 * reference sees what a load would have. `loads`/`stores`: arrays accumulators are read from /
 * written to. `src`: where A and B fragments point — the staged tiles `sa` / `sb` ("shared"), or
 * the operands `mat_a` / `mat_b` ("global": the "none" staging); `copies`: the "coop" staging's
 * fragment stores from the operands into the staged tiles (emu_cp_a / emu_cp_b, each lane copying
 * its 8 of the 256 elements).
 */
function emulationWGSL(loads: string[], stores: string[], src: "shared" | "global" = "shared", copies = false): string {
  const [A, B] = src === "shared" ? ["sa", "sb"] : ["mat_a", "mat_b"];
  const lines = [
    "struct EmuRef { idx: u32, ld: u32, row_major: bool }",
    "struct EmuC { v: array<f32, 8> }",
    `fn emu_at(r: EmuRef, i: u32, j: u32) -> u32 { return select(r.idx + j * r.ld + i, r.idx + i * r.ld + j, r.row_major); }
fn emu_mma(a: EmuRef, b: EmuRef, c: EmuC, lane: u32) -> EmuC {
  var r = c;
  for (var q = 0u; q < 8u; q++) {
    let e = lane + q * 32u;
    let i = e / 16u;
    let j = e % 16u;
    var s = r.v[q];
    for (var k = 0u; k < 16u; k++) { s += f32(${A}[emu_at(a, i, k)]) * f32(${B}[emu_at(b, k, j)]); }
    r.v[q] = s;
  }
  return r;
}`,
    `fn emu_scale(c: EmuC, s: f32) -> EmuC { var r = c; for (var q = 0u; q < 8u; q++) { r.v[q] = r.v[q] * s; } return r; }`,
    `fn emu_add(c: EmuC, d: EmuC) -> EmuC { var r = c; for (var q = 0u; q < 8u; q++) { r.v[q] = r.v[q] + d.v[q]; } return r; }`,
  ];
  if (copies) {
    for (const m of ["a", "b"]) {
      lines.push(`fn emu_cp_${m}(f: EmuRef, idx: u32, ld: u32, row_major: bool, lane: u32) { for (var q = 0u; q < 8u; q++) { let e = lane + q * 32u; let i = e / 16u; let j = e % 16u; s${m}[select(idx + j * ld + i, idx + i * ld + j, row_major)] = mat_${m}[emu_at(f, i, j)]; } }`);
    }
  }
  for (const arr of loads) {
    lines.push(`fn emu_ld_${arr}(idx: u32, ld: u32, lane: u32) -> EmuC { var r: EmuC; for (var q = 0u; q < 8u; q++) { let e = lane + q * 32u; r.v[q] = ${arr}[idx + (e / 16u) * ld + e % 16u]; } return r; }`);
  }
  for (const arr of stores) {
    lines.push(`fn emu_st_${arr}(c: EmuC, idx: u32, ld: u32, lane: u32) { for (var q = 0u; q < 8u; q++) { let e = lane + q * 32u; ${arr}[idx + (e / 16u) * ld + e % 16u] = c.v[q]; } }`);
  }
  return lines.join("\n") + "\n";
}

/**
 * The complete WGSL module of the tiled cooperative-matrix matmul. Bindings: 0 uniform params
 * ({@link COOP_PARAM_NAMES}), 1 A, 2 B (`array<f16>` or `array<f32>`, or vec4 of them), 3 out
 * (`array<f32>`), and with `scaled` 4 amax (`array<u32>`, 2 × 256 partial maxima,
 * matmul-coop-scale.ts). Dispatch ceil(N/BN) × ceil(M/BM) × batch workgroups of the tile's
 * SGM·SGN·32 invocations. Needs the device features "shader-f16" and "wgpu-cooperative-matrix"
 * (16×16×16 f16→f32 offered by the driver), subgroup size 32, and {@link coopWorkgroupBytes} of
 * workgroup memory (with `emulate` only "shader-f16").
 * Every global read is guarded by the matrix bounds and every index into workgroup memory is in
 * range by construction, so the module may be compiled without naga's runtime checks
 * (createShaderModuleTrusted) — the "trusted" choice of matmul-coop.ts.
 * With `packed` (kernel mode) the operands are the f16 copies of matmul-coop-pack.ts, bound as
 * `array<vec4<f16>>` (vec 4), `array<vec4<u32>>` (vec 8) or `array<f16>` ("coop"/"none" staging), with the params
 * {@link COOP_PACKED_PARAM_NAMES} after the others.
 * @throws Error for scaled f16 input without `packed`, `packed` outside kernel mode or without f16
 *   input, kernel mode with a vec other than 1 for f32 operands or 1 for packed ones ("regs"), vec 8 without f16 input,
 *   "coop"/"none" staging without f16 input (or "coop" where a tile's fragments do not split evenly
 *   over its subgroups, or the "wgrad" mode), or a tile that {@link coopTileProblem} refuses.
 */
export function matmulCoopWGSL(o: CoopMatmulOptions): string {
  const t = o.tile ?? COOP_DEFAULT_TILE;
  const problem = coopTileProblem(t);
  if (problem) throw new Error(`matmulCoopWGSL: tile ${coopTileName(t)}: ${problem}`);
  const { BM, BN, BK, SGM, SGN, stages } = t;
  const WG = coopTileThreads(t);
  const NSG = WG / COOP_SUBGROUP;
  const { FM, FN } = coopTileFragments(t);
  const scaled = !!o.scaled;
  const packed = !!o.packed;
  const kernelMode = o.mode === "kernel";
  const direct = o.epilogue === "direct";
  const staging: CoopStaging = o.staging ?? "regs";
  const ops = o.emulate ? EMU_OPS : REAL_OPS;
  if (packed && (!kernelMode || o.input !== "f16")) throw new Error(`matmulCoopWGSL: packed operands need "kernel" mode and input f16`);
  if (scaled && o.input !== "f32" && !packed) throw new Error("matmulCoopWGSL: scaled needs input f32 (f16 operands are already rounded), or packed f16 operands");
  if (staging !== "regs" && o.input !== "f16") throw new Error(`matmulCoopWGSL: staging "${staging}" needs input f16 (fragments are loaded from memory as they are)`);
  if (o.grouped) {
    const why = !kernelMode ? `"kernel" mode` : direct ? `the "scratch" epilogue` : o.grouped === "rows" ? (o.transA ? "transA false" : "") : o.transA && !o.transB ? (staging === "regs" ? "" : `the "regs" staging (its K runs over a group's rows, which fragments would overrun)`) : "transA true and transB false";
    if (why) throw new Error(`matmulCoopWGSL: grouped mode "${o.grouped}" needs ${why}`);
  }
  const V = staging === "regs" ? o.vec ?? 1 : 1; // elements per global load
  if (V === 8 && o.input !== "f16") throw new Error("matmulCoopWGSL: vec 8 needs input f16");
  if (kernelMode && ((packed && staging === "regs" && V === 1) || (!packed && V !== 1))) throw new Error(`matmulCoopWGSL: kernel mode takes vec 1 (f32 operands) or vec 4 / 8 (packed f16 operands, "regs" staging), got vec ${V}`);
  const SA_LD = coopStageLdA(t, o.transA);
  const SB_LD = coopStageLdB(t, o.transB);
  const { SA, SB } = coopStageSizes(t, o.transA, o.transB);
  const SO = scratchFloats(o);
  const guardSelect = (o.guard ?? "select") === "select";
  const mat8 = V === 8 && o.vec8Type === "mat2x4";
  const elt = V === 1 ? o.input : V === 8 ? (mat8 ? "mat2x4<f16>" : "vec4<u32>") : `vec4<${o.input}>`;
  const reg = V === 1 ? "f16" : V === 8 ? (mat8 ? "mat2x4<f16>" : "vec4<u32>") : "vec4<f16>";
  const zero = V === 1 ? "0.0h" : V === 8 ? (mat8 ? "mat2x4<f16>()" : "vec4<u32>()") : "vec4<f16>()";
  const inKernelScale = scaled && !packed;
  const cvt = (x: string, mat: "a" | "b") => (o.input === "f16" ? x : inKernelScale ? `${reg}(${x} * scale_${mat})` : `${reg}(${x})`);
  // Tiles are staged in the operand's stored orientation. Tile of A: !transA: A [M, K] → rows m
  // (BM) × columns k (BK); transA: A [K, M] → rows k (BK) × columns m (BM). B: !transB: [K, N] →
  // rows k × columns n; transB: [N, K] → rows n × columns k. Pass i of invocation li loads the V
  // elements at flat position e = li + i·WG of the tile's (rows × cols/V) grid: row e / (cols/V),
  // column (e % (cols/V))·V — split into a per-invocation part (ar, ac) and a per-pass constant.
  const aCols = o.transA ? BM : BK, aRows = o.transA ? BK : BM;
  const bCols = o.transB ? BK : BN, bRows = o.transB ? BN : BK;
  const split = (cols: number) => {
    const cv = cols / V;
    if (!Number.isInteger(cv) || !(WG % cv === 0 || cv % WG === 0)) throw new Error(`matmulCoopWGSL: tile ${coopTileName(t)}: ${cols} staged columns do not map onto ${WG} invocations with vec ${V}`);
    return cv;
  };
  const cvA = staging === "regs" ? split(aCols) : 1, cvB = staging === "regs" ? split(bCols) : 1;
  // passes of vector loads per invocation per staged tile; a tile of fewer vectors than
  // invocations (e.g. 128×16 halves as vec 8 over 512 invocations) takes one pass by the first
  // `lim` invocations (whole subgroups, so the guard is subgroup-uniform)
  const vecs = (rows: number, cols: number) => (rows * cols) / V;
  const passes = (rows: number, cols: number) => Math.max(1, vecs(rows, cols) / WG);
  const partial = (rows: number, cols: number, cv: number) => {
    const n = vecs(rows, cols);
    if (staging !== "regs" || n >= WG) return 0;
    if (n % COOP_SUBGROUP !== 0 || WG % cv !== 0) throw new Error(`matmulCoopWGSL: tile ${coopTileName(t)}: a staged tile of ${n} vec ${V} loads does not map onto whole subgroups of ${WG} invocations`);
    return n;
  };
  const PA = staging === "regs" ? passes(aRows, aCols) : 0, PB = staging === "regs" ? passes(bRows, bCols) : 0;
  if (staging === "regs" && (!Number.isInteger(PA) || !Number.isInteger(PB))) throw new Error(`matmulCoopWGSL: tile ${coopTileName(t)}: staged tiles do not split into vec ${V} loads over ${WG} invocations`);
  const limA = partial(aRows, aCols, cvA), limB = partial(bRows, bCols, cvB);
  const place = (cv: number, i: number): { dr: number; dc: number } => (WG % cv === 0 ? { dr: (i * WG) / cv, dc: 0 } : { dr: Math.floor((i * WG) / cv), dc: ((i * WG) % cv) * V });
  // (stored row, stored column) → (origin, bound) per layout; leading dimensions lda, ldb
  const layoutOf = (mat: "a" | "b") => mat === "a"
    ? (o.transA ? { r0: "k0", rb: "dim_k", c0: "m0", cb: "dim_m", ld: "lda" } : { r0: "m0", rb: "dim_m", c0: "k0", cb: "dim_k", ld: "lda" })
    : (o.transB ? { r0: "n0", rb: "dim_n", c0: "k0", cb: "dim_k", ld: "ldb" } : { r0: "k0", rb: "dim_k", c0: "n0", cb: "dim_n", ld: "ldb" });
  const stage = (mat: "a" | "b", i: number): { load: string; store: string } => {
    const { dr, dc } = place(mat === "a" ? cvA : cvB, i);
    const [rowVar, colVar] = mat === "a" ? ["ar", "ac"] : ["br", "bc"];
    const layout = layoutOf(mat);
    const base = mat === "a" ? "a_base" : "b_base";
    const idx = `${base} + r * ${layout.ld} + c`;
    const at = V === 1 ? `mat_${mat}[${idx}]` : `mat_${mat}[(${idx}) / ${V}u]`;
    const inb = `r < ${layout.rb} && c < ${layout.cb}`;
    const atSafe = V === 1 ? `mat_${mat}[select(0u, ${idx}, ok)]` : `mat_${mat}[select(0u, (${idx}) / ${V}u, ok)]`;
    // select() takes no matrices: a mat2x4 load selects its two columns
    const load = guardSelect && mat8
      ? `    { let r = ${layout.r0} + ${rowVar} + ${dr}u; let c = ${layout.c0} + ${colVar} + ${dc}u; let ok = ${inb}; let v = ${atSafe}; r${mat}[${i}] = mat2x4<f16>(select(vec4<f16>(), v[0], ok), select(vec4<f16>(), v[1], ok)); }`
      : guardSelect
      ? `    { let r = ${layout.r0} + ${rowVar} + ${dr}u; let c = ${layout.c0} + ${colVar} + ${dc}u; let ok = ${inb}; r${mat}[${i}] = select(${zero}, ${cvt(atSafe, mat)}, ok); }`
      : `    { let r = ${layout.r0} + ${rowVar} + ${dr}u; let c = ${layout.c0} + ${colVar} + ${dc}u; var v = ${zero}; if (${inb}) { v = ${cvt(at, mat)}; } r${mat}[${i}] = v; }`;
    const ld = mat === "a" ? SA_LD : SB_LD;
    const size = mat === "a" ? SA : SB;
    const dst = `s${mat}[${stages === 2 ? `buf * ${size}u + ` : ""}(${rowVar} + ${dr}u) * ${ld}u + ${colVar} + ${dc}u`;
    let store: string;
    if (V === 1) store = `    ${dst}] = r${mat}[${i}];`;
    else if (V === 4) store = ["x", "y", "z", "w"].map((q, j) => `    ${dst} + ${j}u] = r${mat}[${i}].${q};`).join("\n");
    else if (mat8) store = [0, 1].flatMap((col) => ["x", "y", "z", "w"].map((q, j) => `    ${dst} + ${4 * col + j}u] = r${mat}[${i}][${col}].${q};`)).join("\n");
    else {
      store = ["x", "y", "z", "w"].map((q, j) => `    { let h = vec2<f16>(unpack2x16float(r${mat}[${i}].${q})); ${dst} + ${2 * j}u] = h.x; ${dst} + ${2 * j + 1}u] = h.y; }`).join("\n");
    }
    const lim = mat === "a" ? limA : limB;
    if (lim) return { load: `    if (li < ${lim}u) {\n${load}\n    }`, store: `    if (li < ${lim}u) {\n${store}\n    }` };
    return { load, store };
  };
  const loads: string[] = [], stores: string[] = [];
  if (staging === "regs") {
    for (let i = 0; i < PA; i++) {
      const a = stage("a", i);
      loads.push(a.load);
      stores.push(a.store);
    }
    for (let i = 0; i < PB; i++) {
      const b = stage("b", i);
      loads.push(b.load);
      stores.push(b.store);
    }
  } else if (staging === "coop") {
    // the tiles' fragments in stored orientation, dealt round-robin to the subgroups: fragment
    // f = sg + i·NSG; loaded from the operand into f{a|b}{i}, stored into the staged tile
    for (const mat of ["a", "b"] as const) {
      const [rows, cols] = mat === "a" ? [aRows, aCols] : [bRows, bCols];
      const nf = (rows / 16) * (cols / 16);
      if (nf % NSG !== 0) throw new Error(`matmulCoopWGSL: tile ${coopTileName(t)}: the ${nf} fragments of a staged ${mat === "a" ? "A" : "B"} tile do not split evenly over ${NSG} subgroups (staging "coop")`);
      const L = layoutOf(mat);
      const rowMajor = mat === "a" ? !o.transA : !o.transB;
      const role = mat === "a" ? "A" : "B";
      const ld = mat === "a" ? SA_LD : SB_LD;
      const size = mat === "a" ? SA : SB;
      for (let i = 0; i < nf / NSG; i++) {
        const f = `(sg + ${i * NSG}u)`;
        const fr = `(${f} / ${cols / 16}u) * 16u`, fc = `(${f} % ${cols / 16}u) * 16u`;
        loads.push(`    f${mat}${i} = ${ops.load(role, `mat_${mat}`, `${mat}_base + (${L.r0} + ${fr}) * ${L.ld} + ${L.c0} + ${fc}`, L.ld, rowMajor)};`);
        stores.push(`    ${ops.storeAB(mat, `f${mat}${i}`, `s${mat}`, `${stages === 2 ? `buf * ${size}u + ` : ""}${fr} * ${ld}u + ${fc}`, `${ld}u`, rowMajor)}`);
      }
    }
  }
  const fragDecls = (init: boolean) => loads.map((l) => l.replace(/^    f(a|b)(\d+) = /, (_m, x, n) => `    ${init ? "var " : ""}f${x}${n} = `)).join("\n");
  // Fragment loads for the subgroup's FM (m) × FN (n) fragments at k offset kk within the tile
  // (staged tiles), or at K position kx of the operand ("none").
  const fragA = (i: number, kk: number) =>
    o.transA
      ? ops.load("A", "sa", `sa0 + ${kk * SA_LD}u + wm + ${i * 16}u`, `${SA_LD}u`, false)
      : ops.load("A", "sa", `sa0 + (wm + ${i * 16}u) * ${SA_LD}u + ${kk}u`, `${SA_LD}u`, true);
  const fragB = (j: number, kk: number) =>
    o.transB
      ? ops.load("B", "sb", `sb0 + (wn + ${j * 16}u) * ${SB_LD}u + ${kk}u`, `${SB_LD}u`, false)
      : ops.load("B", "sb", `sb0 + ${kk * SB_LD}u + wn + ${j * 16}u`, `${SB_LD}u`, true);
  const gFragA = (i: number, kx: string) =>
    o.transA
      ? ops.load("A", "mat_a", `a_base + (${kx}) * lda + m0 + wm + ${i * 16}u`, "lda", false)
      : ops.load("A", "mat_a", `a_base + (m0 + wm + ${i * 16}u) * lda + ${kx}`, "lda", true);
  const gFragB = (j: number, kx: string) =>
    o.transB
      ? ops.load("B", "mat_b", `b_base + (n0 + wn + ${j * 16}u) * ldb + ${kx}`, "ldb", false)
      : ops.load("B", "mat_b", `b_base + (${kx}) * ldb + n0 + wn + ${j * 16}u`, "ldb", true);
  const compute: string[] = [];
  for (let kk = 0; kk < BK; kk += 16) {
    compute.push(`    {`);
    for (let i = 0; i < FM; i++) compute.push(`      let a${i} = ${fragA(i, kk)};`);
    for (let j = 0; j < FN; j++) compute.push(`      let b${j} = ${fragB(j, kk)};`);
    for (let i = 0; i < FM; i++) for (let j = 0; j < FN; j++) compute.push(`      c${i}_${j} = ${ops.mma(`a${i}`, `b${j}`, `c${i}_${j}`)};`);
    compute.push(`    }`);
  }
  const outScale = (x: string) => (scaled ? ops.scale(ops.scale(x, "out_s1"), "out_s2") : x);
  const epilogue: string[] = [];
  for (let i = 0; i < FM; i++) {
    for (let j = 0; j < FN; j++) {
      if (direct) {
        // whole fragments in or out (M, N multiples of 16): subgroup-uniform guard of the store, no
        // scratch. naga wants fragment loads in workgroup-uniform control flow, so the accumulate
        // load runs unguarded, from the matrix's first fragment when this one lies outside. The
        // stride is a let: naga 30 leaves a uniform load written inside coopStoreT unemitted.
        epilogue.push(`  {`);
        epilogue.push(`    let m = m0 + wm + ${i * 16}u; let n = n0 + wn + ${j * 16}u;`);
        epilogue.push(`    let inside = m < dim_m && n < dim_n;`);
        epilogue.push(`    let o = select(c_base, c_base + m * P.N + n, inside);`);
        const v = outScale(`c${i}_${j}`);
        epilogue.push(`    var r = ${o.accumulate ? ops.add(ops.load("C", "out", "o", "ldc", true), v) : v};`);
        epilogue.push(`    if (inside) { ${ops.store("r", "out", "o", "ldc")} }`);
        epilogue.push(`  }`);
      } else {
        epilogue.push(`  ${ops.store(`c${i}_${j}`, "so", "sg * 256u", "16u")}`);
        epilogue.push(`  workgroupBarrier();`);
        epilogue.push(`  for (var e = lane; e < 256u; e += ${COOP_SUBGROUP}u) {`);
        epilogue.push(`    let m = m0 + wm + ${i * 16}u + e / 16u; let n = n0 + wn + ${j * 16}u + e % 16u;`);
        epilogue.push(`    if (m < dim_m && n < dim_n) { let o = c_base + m * P.N + n; out[o] = ${o.accumulate ? "out[o] + " : ""}so[sg * 256u + e]${scaled ? " * out_s1 * out_s2" : ""}; }`);
        epilogue.push(`  }`);
        epilogue.push(`  workgroupBarrier();`);
      }
    }
  }
  // Scaled: reduce the 256 partial maxima of A (amax[0..256)) and of B (amax[256..512)) in the
  // scratch (free until the epilogue; finite non-negative values, so f32 max = bit max, and a
  // subnormal flushed to 0 gives the same clamp exponent), then the exponents and factors. Packed
  // operands were scaled when packed (only the operands that scale_mask names: f16 ones are not).
  const P_ = COOP_AMAX_PARTIALS;
  const expA = packed ? "select(0, coop_scale_exp(bitcast<u32>(so[0])), (P.scale_mask & 1u) != 0u)" : "coop_scale_exp(bitcast<u32>(so[0]))";
  const expB = packed ? `select(0, coop_scale_exp(bitcast<u32>(so[${WG}u])), (P.scale_mask & 2u) != 0u)` : `coop_scale_exp(bitcast<u32>(so[${WG}u]))`;
  const prologue = `  {
    var ma = 0.0;
    var mb = 0.0;
    for (var i = li; i < ${P_}u; i += ${WG}u) {
      ma = max(ma, bitcast<f32>(amax[i]));
      mb = max(mb, bitcast<f32>(amax[${P_}u + i]));
    }
    so[li] = ma;
    so[${WG}u + li] = mb;
  }
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (li < s) {
      so[li] = max(so[li], so[li + s]);
      so[${WG}u + li] = max(so[${WG}u + li], so[${WG}u + li + s]);
    }
    workgroupBarrier();
  }
  let ka = ${expA};
  let kb = ${expB};
${inKernelScale ? "  let scale_a = coop_pow2(ka);\n  let scale_b = coop_pow2(kb);\n" : ""}  let out_h = (ka + kb) / 2;
  let out_s1 = coop_pow2(-out_h);
  let out_s2 = coop_pow2(out_h - ka - kb);
  workgroupBarrier();
`;
  const accs: string[] = [];
  for (let i = 0; i < FM; i++) for (let j = 0; j < FN; j++) accs.push(`  var c${i}_${j} = ${ops.zeroC};`);
  const emu = o.emulate ? emulationWGSL(direct && o.accumulate ? ["out"] : [], direct ? ["out"] : ["so"], staging === "none" ? "global" : "shared", staging === "coop") : "";
  const storeStaged = stores.map((l) => "  " + l).join("\n");
  let loop: string;
  let before: string;
  if (staging === "none") {
    // one 16-deep K step of fragments ahead: load step s + 1 (the last step reloads itself, so
    // every load stays inside the padded operands) while step s is multiplied
    const decl: string[] = [];
    for (let i = 0; i < FM; i++) decl.push(`  var a${i} = ${gFragA(i, "0u")};`);
    for (let j = 0; j < FN; j++) decl.push(`  var b${j} = ${gFragB(j, "0u")};`);
    before = decl.join("\n");
    const body: string[] = [];
    body.push(`    let kn = select(s * 16u, (s + 1u) * 16u, s + 1u < ns);`);
    for (let i = 0; i < FM; i++) body.push(`    let na${i} = ${gFragA(i, "kn")};`);
    for (let j = 0; j < FN; j++) body.push(`    let nb${j} = ${gFragB(j, "kn")};`);
    for (let i = 0; i < FM; i++) for (let j = 0; j < FN; j++) body.push(`    c${i}_${j} = ${ops.mma(`a${i}`, `b${j}`, `c${i}_${j}`)};`);
    for (let i = 0; i < FM; i++) body.push(`    a${i} = na${i};`);
    for (let j = 0; j < FN; j++) body.push(`    b${j} = nb${j};`);
    loop = `  let ns = nk * ${BK / 16}u; // 16-deep steps (K is padded to BK)
  for (var s = 0u; s < ns; s++) {
${body.join("\n")}
  }`;
  } else if (staging === "coop") {
    // fragments of the first tiles, stored; then per step: load the next tiles' fragments (the
    // last step reloads its own, staying inside the operands), multiply, store them
    before = `  k0 = 0u;
${fragDecls(true)}
${stores.join("\n")}
  workgroupBarrier();`;
    loop = `  for (var t = 0u; t < nk; t++) {
    k0 = select(t, t + 1u, t + 1u < nk) * ${BK}u;
${fragDecls(false)}
    let sa0 = ${stages === 2 ? `buf * ${SA}u` : "0u"};
    let sb0 = ${stages === 2 ? `buf * ${SB}u` : "0u"};
${compute.join("\n")}
    ${stages === 2 ? "buf = 1u - buf;" : "workgroupBarrier();"}
${storeStaged}
    workgroupBarrier();
  }`;
  } else {
    before = `  if (nk > 0u) {
${loads.join("\n")}
${stores.join("\n")}
  }
  workgroupBarrier();`;
    // two stages: compute on one buffer while the next tile goes into the other (one barrier per
    // step); one stage: a barrier before overwriting the tile being computed on (two per step)
    loop = `  for (var t = 0u; t < nk; t++) {
    let has_next = t + 1u < nk;
    k0 = (t + 1u) * ${BK}u;
    if (has_next) {
${loads.map((l) => "  " + l).join("\n")}
    }
    let sa0 = ${stages === 2 ? `buf * ${SA}u` : "0u"};
    let sb0 = ${stages === 2 ? `buf * ${SB}u` : "0u"};
${compute.join("\n")}
    ${stages === 2 ? "buf = 1u - buf;" : "workgroupBarrier();"}
    if (has_next) {
${storeStaged}
    }
    workgroupBarrier();
  }`;
  }
  const lda = packed ? "P.lda" : o.transA ? "P.M" : "P.K";
  const ldb = packed ? "P.ldb" : o.transB ? "P.K" : "P.N";
  const params = [...COOP_PARAM_NAMES, ...(o.grouped ? COOP_GROUPED_PARAM_NAMES : []), ...(packed ? COOP_PACKED_PARAM_NAMES : [])];
  const staged = staging !== "none";
  const module = `enable f16;
${o.emulate ? "" : "enable wgpu_cooperative_matrix;\n"}// ${coopKernelKey(o)}: tensor-core matmul, tile ${coopTileName(t)} (${FM}x${FN} fragments per subgroup), ${direct ? "direct" : "scratch"} epilogue, staging ${staging}${o.emulate ? ", cooperative matrices emulated" : ""}
struct Params {
${params.map((n) => `  ${n}: u32,`).join("\n")}
};
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> mat_a: array<${elt}>;
@group(0) @binding(2) var<storage, read> mat_b: array<${elt}>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
${scaled ? "@group(0) @binding(4) var<storage, read> amax: array<u32>;\n" : ""}${staged ? `var<workgroup> sa: array<f16, ${stages * SA}>;
var<workgroup> sb: array<f16, ${stages * SB}>;
` : ""}${SO > 0 ? `var<workgroup> so: array<f32, ${SO}>;\n` : ""}${scaled ? COOP_SCALE_WGSL : ""}${emu}${o.grouped ? "fn coop_off(g: u32) -> u32 { return min(u32(max(b_off[P.off_off + g], 0)), P.R); }\n" : ""}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let lda = ${lda};
  let ldb = ${ldb};
${placement(o.grouped, BM, BN)}
  let ldc = P.N;
  let sg = li / ${COOP_SUBGROUP}u;
  let lane = li % ${COOP_SUBGROUP}u;
  let wm = (sg / ${SGN}u) * ${BM / SGM}u;
  let wn = (sg % ${SGN}u) * ${BN / SGN}u;
${staging === "regs" ? `  let ar = ${WG % cvA === 0 ? `li / ${cvA}u` : "0u"};
  let ac = ${WG % cvA === 0 ? `(li % ${cvA}u) * ${V}u` : `li * ${V}u`};
  let br = ${WG % cvB === 0 ? `li / ${cvB}u` : "0u"};
  let bc = ${WG % cvB === 0 ? `(li % ${cvB}u) * ${V}u` : `li * ${V}u`};
` : ""}${scaled ? prologue : ""}${staging === "regs" ? `  var ra: array<${reg}, ${PA}>;
  var rb: array<${reg}, ${PB}>;
` : ""}${accs.join("\n")}
  let nk = (dim_k + ${BK - 1}u) / ${BK}u;
  var k0 = 0u;
  var buf = 0u;
${before}
${loop}
${epilogue.join("\n")}
}
`;
  if (!kernelMode) return module;
  // drop the module's own Params and bindings; the backend's assembler declares P, b_a, b_b, b_out
  return module
    .replace(/struct Params \{[^}]*\};\n/, "")
    .replace(/^@group\(0\).*\n/gm, "")
    .replace(/\bmat_a\[/g, "b_a[")
    .replace(/\bmat_b\[/g, "b_b[")
    .replace(/\bout\[/g, "b_out[")
    .replace(/\bamax\[/g, "b_amax[")
    .replace(/\bemu_ld_out\(/g, "emu_ld_b_out(")
    .replace(/\bemu_st_out\(/g, "emu_st_b_out(");
}
