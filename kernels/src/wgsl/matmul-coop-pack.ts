/**
 * Operand packing for the tensor-core matmul (matmul-coop-wgsl.ts `packed`): one pass that turns
 * an operand held as f32, f16 or bf16 into a zero-padded f16 copy, scaled by a power of two, that
 * the matmul then reads with 16-byte vector loads (or cooperative-matrix loads straight from
 * memory) and without any conversion in its K loop.
 *
 * Why a pass of its own: the matmul that converted f32 operands in registers (scalar 4-byte loads,
 * scale, round, 2-byte stores into workgroup memory) ran at 66–86 TFLOP/s on the H200 where the
 * same kernel fed f16 with vector loads ran at 155 (docs/performance.md, "Tensor cores"). Packing
 * reads each operand element once and writes 2 bytes, i.e. 6 bytes per f32 element (4 per 16-bit
 * one) against the ≥ 2·M·N·K / (2·bytes-per-element) re-reads of the K loop: for a 4096³ product,
 * 2 × 16.8 M elements ≈ 0.2 GB ≈ 50 µs at 4 TB/s against ~340 µs of MMA at 400 TFLOP/s.
 *
 * Layout (per operand, in its stored orientation): `slices` matrices of `rows` × `cols` elements
 * at src_off + s·src_stride + r·src_ld + c (elements of the source dtype) become halves at
 * s·dst_stride + r·dst_ld + c of the destination for r < dst_rows, c < dst_ld, zero where
 * r ≥ rows or c ≥ cols. dst_ld, dst_stride are even (whole u32 words; the launches round them to
 * multiples of 8 halves so 16-byte loads stay aligned), dst_rows ≥ rows: the padding lets the matmul
 * read whole vectors, or whole 16×16 fragments, past the edges and get zeros.
 *
 * Numerics: with `scaled`, x·2^k is rounded to f16 to nearest even (prelude.ts f32_to_f16), k the
 * operand's exponent from the partial maxima of matmul-coop-scale.ts (max·2^k ∈ [2^14, 2^15), so no
 * finite value overflows); exactly the values the in-register path staged. bf16 → f32 is exact and
 * f16 carries 11 significant bits where bf16 has 8, so a bf16 element is packed exactly wherever
 * x·2^k ≥ 2^−17 (normal f16 from 2^−14; subnormals keep ≥ 8 bits down to 2^−17), i.e. down to
 * 2^−31..2^−32 of the operand's largest |x|; below that it loses bits, and below ~2^−39 of the
 * largest (x·2^k < 2^−25) it becomes 0 (matmul-coop-scale.ts). f32 elements keep 11 bits (relative
 * rounding error ≤ 2^−11) down to 2^−28 of the largest. Products of f16 values are exact in the
 * matmul's f32 accumulators, so the result's error is this rounding of the operands plus the
 * accumulation (bounded as |Δ| ≲ (2·2^−11 + K·2^−24)·Σ|a·b| for K terms; the tests check 2e-3 of
 * Σ|a·b| for unrounded inputs and 1e-4 for f16-exact ones).
 * An f16 operand is copied bit for bit, unscaled (its values cannot overflow f16; the matmul then
 * takes exponent 0 for it, params `scale_mask`).
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { bindTypeOf, memoKernel, u32s } from "./launch.ts";
import { COOP_AMAX_PARTIALS, COOP_AMAX_WORDS, COOP_SCALE_WGSL } from "./matmul-coop-scale.ts";

/** Uniform parameters of the pack kernel, in order (u32; element offsets, strides in elements of
 * the source and halves of the destination; `which`: 0 takes A's partial maxima, 1 B's). */
export const COOP_PACK_PARAM_NAMES = ["src_off", "rows", "cols", "src_ld", "src_stride", "slices", "dst_ld", "dst_rows", "dst_stride", "which"] as const;

/** Invocations per workgroup of the pack kernel. */
export const COOP_PACK_WG = 256;

/** Most workgroups of one pack dispatch (x); larger operands loop (grid stride). */
export const COOP_PACK_MAX_WORKGROUPS = 8192;

/** Halves the packed rows and slices are rounded up to (16 bytes: one vec4<u32> load). */
export const COOP_PACK_ALIGN = 8;

/** Source element types the pack reads. */
export type CoopPackSource = "f32" | "f16" | "bf16";

/** One operand's packing (see the file comment). */
export interface CoopPackGeometry {
  srcOff: number;
  rows: number;
  cols: number;
  srcLd: number;
  srcStride: number;
  slices: number;
  /** Padded row length in halves (even; the launches use multiples of {@link COOP_PACK_ALIGN}). */
  dstLd: number;
  /** Padded rows per slice (≥ rows). */
  dstRows: number;
  /** Halves between slices (≥ dstRows·dstLd, even). */
  dstStride: number;
}

/** Round `n` up to a multiple of `m`. */
export function roundUp(n: number, m: number): number {
  return Math.ceil(n / m) * m;
}

/** The packing of a `rows` × `cols` operand (row stride srcLd, `slices` of it srcStride apart),
 * padded to multiples of `padRows` rows and `padCols` columns (at least {@link COOP_PACK_ALIGN}
 * halves per row), plus `extraRows` zero rows after each slice (grouped products whose row tiles may
 * start anywhere). */
export function coopPackGeometry(srcOff: number, rows: number, cols: number, srcLd: number, srcStride: number, slices: number, padRows = 1, padCols = COOP_PACK_ALIGN, extraRows = 0): CoopPackGeometry {
  const dstLd = roundUp(Math.max(cols, 1), Math.max(padCols, COOP_PACK_ALIGN));
  const dstRows = roundUp(rows, padRows) + extraRows;
  return { srcOff, rows, cols, srcLd, srcStride, slices, dstLd, dstRows, dstStride: roundUp(dstRows * dstLd, COOP_PACK_ALIGN) };
}

/** Halves of the destination of `g` (a multiple of {@link COOP_PACK_ALIGN}). */
export function coopPackHalves(g: CoopPackGeometry): number {
  return g.slices * g.dstStride;
}

/** The pack's loop, one destination u32 word (2 halves) per step: any even dst_ld / dst_stride. */
const WORD_LOOP = `  let wpr = P.dst_ld / 2u; // destination words per row
  let words = P.slices * (P.dst_stride / 2u);
  for (var w = wg.x * ${COOP_PACK_WG}u + li; w < words; w += nwg.x * ${COOP_PACK_WG}u) {
    let sl = w / (P.dst_stride / 2u);
    let q = w % (P.dst_stride / 2u);
    let r = q / wpr;
    let c = (q % wpr) * 2u;
    var lo = 0u;
    var hi = 0u;
    if (r < P.rows) {
      let base = P.src_off + sl * P.src_stride + r * P.src_ld;
      if (c < P.cols) { lo = pack_half(base + c, s); }
      if (c + 1u < P.cols) { hi = pack_half(base + c + 1u, s); }
    }
    b_dst[w] = lo | (hi << 16u);
  }`;

/** The pack's loop, one 16-byte chunk (8 halves, a vec4<u32> store) per step: dst_ld and dst_stride
 * multiples of 8 (so no chunk crosses a row), the chunk's 8 source elements read independently (a
 * row's interior chunks without per-element guards). Each step thus keeps 8 loads in flight where
 * the word loop kept 2 — the word loop's 2M invocations × 8 bytes left the H200's HBM at ~1 TB/s. */
const CHUNK_LOOP = `  let cpr = P.dst_ld / 8u; // destination chunks per row
  let cps = P.dst_stride / 8u; // per slice
  let chunks = P.slices * cps;
  for (var w = wg.x * ${COOP_PACK_WG}u + li; w < chunks; w += nwg.x * ${COOP_PACK_WG}u) {
    let sl = w / cps;
    let q = w % cps;
    let r = q / cpr;
    let c = (q % cpr) * 8u;
    var v = vec4<u32>();
    if (r < P.rows) {
      let base = P.src_off + sl * P.src_stride + r * P.src_ld + c;
      if (c + 8u <= P.cols) {
        v = vec4<u32>(pack_half(base, s) | (pack_half(base + 1u, s) << 16u), pack_half(base + 2u, s) | (pack_half(base + 3u, s) << 16u),
                      pack_half(base + 4u, s) | (pack_half(base + 5u, s) << 16u), pack_half(base + 6u, s) | (pack_half(base + 7u, s) << 16u));
      } else {
        var h: array<u32, 8>;
        for (var j = 0u; j < 8u; j++) { if (c + j < P.cols) { h[j] = pack_half(base + j, s); } }
        v = vec4<u32>(h[0] | (h[1] << 16u), h[2] | (h[3] << 16u), h[4] | (h[5] << 16u), h[6] | (h[7] << 16u));
      }
    }
    b_dst[w] = v;
  }`;

function packKernel(src: CoopPackSource, scaled: boolean, width: 2 | 8): Kernel {
  const label = `coop_pack_${src}${scaled ? "_scaled" : ""}${width === 8 ? "_x8" : ""}`;
  const W = COOP_AMAX_PARTIALS;
  // element (one half) at flat source index i, as f16 bits; f32/bf16 scaled by 2^k first
  const half = src === "f16"
    ? "fn pack_half(i: u32, s: f32) -> u32 { return half_bits(b_src[i >> 1u], i); }"
    : `fn pack_half(i: u32, s: f32) -> u32 { return f32_to_f16(${src === "f32" ? "b_src[i]" : "bf16_to_f32(half_bits(b_src[i >> 1u], i))"}${scaled ? " * s" : ""}); }`;
  const code = `${scaled ? COOP_SCALE_WGSL : ""}
var<workgroup> pack_red: array<u32, ${W}>;
${half}
@compute @workgroup_size(${COOP_PACK_WG})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  var s = 1.0;
${scaled ? `  // the operand's exponent from its ${W} partial maxima (matmul-coop-scale.ts), reduced in a fixed order
  pack_red[li] = b_amax[P.which * ${W}u + li];
  workgroupBarrier();
  for (var h = ${W / 2}u; h > 0u; h = h >> 1u) {
    if (li < h) { pack_red[li] = max(pack_red[li], pack_red[li + h]); }
    workgroupBarrier();
  }
  s = coop_pow2(coop_scale_exp(pack_red[0]));
` : ""}${width === 2 ? WORD_LOOP : CHUNK_LOOP}
}`;
  return memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_src", type: bindTypeOf(src), write: false },
      { name: "b_dst", type: width === 8 ? "u32x4" : "u32", write: true },
      ...(scaled ? [{ name: "b_amax", type: "u32" as const, write: false }] : []),
    ],
    params: u32s(...COOP_PACK_PARAM_NAMES),
    code,
  }));
}

/**
 * The dispatch packing one operand of `src` (f32, f16 or bf16 buffer) into `dst` (a buffer of
 * 16-bit elements, at least {@link coopPackHalves} long, written from element 0) by `g`. With
 * `amax` (the u32 partial maxima of matmul-coop-scale.ts coopAbsMaxLaunch; `which` 0 = A's, 1 =
 * B's) f32 and bf16 sources are scaled by their operand's power of two; f16 sources are never
 * scaled (amax must then be null). Returns null when there is nothing to write.
 * @throws Error on a source of another dtype, a destination that is not 16-bit or too short,
 *   amax given for an f16 source or missing/short for another, odd dstLd/dstStride, or
 *   dstRows < rows.
 */
export function coopPackLaunch(src: Buf, dst: Buf, g: CoopPackGeometry, amax: Buf | null, which: 0 | 1): Launch | null {
  const dt = src.dtype;
  if (dt !== "f32" && dt !== "f16" && dt !== "bf16") throw new Error(`coop pack: the source must be f32, f16 or bf16, got ${dt}`);
  if (dst.dtype !== "f16") throw new Error(`coop pack: the destination must be f16, got ${dst.dtype}`);
  if (dst.length < coopPackHalves(g)) throw new Error(`coop pack: the destination holds ${dst.length} halves, the packing needs ${coopPackHalves(g)}`);
  if (g.dstLd % 2 !== 0 || g.dstStride % 2 !== 0 || g.dstRows < g.rows || g.dstLd < g.cols) throw new Error(`coop pack: bad geometry ${JSON.stringify(g)} (dstLd, dstStride even; dstRows ≥ rows; dstLd ≥ cols)`);
  if (dt === "f16" && amax) throw new Error("coop pack: f16 sources are copied unscaled (amax must be null)");
  if (dt !== "f16" && (!amax || amax.dtype !== "u32" || amax.length < COOP_AMAX_WORDS)) throw new Error(`coop pack: ${dt} sources need the u32 partial maxima (≥ ${COOP_AMAX_WORDS} elements)`);
  const words = coopPackHalves(g) / 2;
  if (words === 0) return null;
  const scaled = dt !== "f16";
  const params = [g.srcOff, g.rows, g.cols, g.srcLd, g.srcStride, g.slices, g.dstLd, g.dstRows, g.dstStride, which];
  // 16-byte chunks wherever rows and slices are whole chunks (every geometry of coopPackGeometry)
  const width = g.dstLd % 8 === 0 && g.dstStride % 8 === 0 ? 8 : 2;
  const steps = width === 8 ? words / 4 : words;
  return { kernel: packKernel(dt, scaled, width), bufs: scaled ? [src, dst, amax!] : [src, dst], params, workgroups: [Math.min(COOP_PACK_MAX_WORKGROUPS, Math.ceil(steps / COOP_PACK_WG)), 1, 1] };
}
