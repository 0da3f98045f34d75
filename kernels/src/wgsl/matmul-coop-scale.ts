/**
 * Per-operand power-of-two scaling of the tensor-core matmul (matmul-coop-wgsl.ts), so that f32
 * operands of any magnitude (bf16 jobs' unscaled gradients ~5e-7, activations ~1e4) survive the
 * rounding to f16 when staged.
 *
 * Before a scaled coop matmul, one dispatch ({@link coopAbsMaxLaunch}) reduces the largest finite
 * |x| of A and of B into {@link COOP_AMAX_PARTIALS} partial maxima each (f32 bit patterns as u32 in
 * a small device buffer; nothing is read by the host). The coop kernel's prologue reduces the
 * partials, takes an exponent k per operand ({@link coopScaleExponent}) such that max·2^k lies in
 * [2^14, 2^15) — below f16's largest finite 65504 with a factor 2 of headroom, so rounding can never
 * reach inf — stages x·2^kA and y·2^kB as f16, accumulates in f32 and multiplies the result by
 * 2^−(kA+kB) at the store. Multiplying by a power of two is exact (barring f32 under/overflow), so
 * the result equals Σ h(x·2^kA)·h(y·2^kB)·2^−(kA+kB), h = round to f16: every operand keeps f16's
 * 11-bit relative precision over its top 2^24 of range, whatever its magnitude. This is the same idea
 * as the per-tensor scale factors of FP8 training (Micikevicius et al., "FP8 Formats for Deep
 * Learning", 2022; NVIDIA Transformer Engine's delayed scaling), here computed from the current
 * operand rather than an amax history.
 *
 * Special values: NaN and ±inf are left out of the maximum (non-finite |x| counts as 0) and pass
 * through the scaling unchanged (NaN·2^k = NaN, inf·2^k = inf, and f16 holds both), so results are
 * NaN/inf exactly where f32 arithmetic would give them. An operand whose finite elements are all 0
 * (or f32-subnormal) gets the clamp exponent {@link COOP_SCALE_MAX_EXP}, which leaves zeros zero.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { bindTypeOf, memoKernel, u32s } from "./launch.ts";

/** Partial maxima per operand written by {@link coopAbsMaxLaunch} (= its workgroups per operand,
 * = the coop kernel's workgroup size, so each coop invocation reads one partial of A and one of B). */
export const COOP_AMAX_PARTIALS = 256;

/** Elements of the u32 scratch of {@link coopAbsMaxLaunch}: partials of A, then of B. */
export const COOP_AMAX_WORDS = 2 * COOP_AMAX_PARTIALS;

/** The scaled maximum lies in [2^TARGET, 2^(TARGET+1)): 2^15 = 32768 < 65504 (f16's largest). */
export const COOP_SCALE_TARGET_EXP = 14;

/** Exponents are clamped to ±126, so 2^k and the two halves of 2^−(kA+kB) are normal f32 values. */
export const COOP_SCALE_MAX_EXP = 126;

const f32v = new Float32Array(1);
const u32v = new Uint32Array(f32v.buffer);

/** The f32 bit pattern of |x| when x is finite after rounding to f32, else 0 (the reduction's
 * per-element value; ordering of these patterns = ordering of the magnitudes). */
export function finiteAbsBits(x: number): number {
  f32v[0] = x;
  const u = u32v[0]! & 0x7fffffff;
  return u < 0x7f800000 ? u : 0;
}

/**
 * The exponent k of an operand whose largest finite |x| has f32 bit pattern `maxBits` (see
 * {@link finiteAbsBits}): k = min(141 − biased exponent, 126), i.e. 14 − floor(log2 max) for normal
 * maxima, so max·2^k ∈ [2^14, 2^15). Zero or f32-subnormal maxima give 126. Range: [−113, 126].
 * The WGSL `coop_scale_exp` of {@link COOP_SCALE_WGSL} computes the same.
 * @throws Error when maxBits is not a u32 below 0x7f800000 (a finite non-negative f32).
 */
export function coopScaleExponent(maxBits: number): number {
  if (!Number.isInteger(maxBits) || maxBits < 0 || maxBits >= 0x7f800000) throw new Error(`coopScaleExponent: maxBits must be the bit pattern of a finite non-negative f32, got ${maxBits}`);
  return Math.min(127 + COOP_SCALE_TARGET_EXP - (maxBits >>> 23), COOP_SCALE_MAX_EXP);
}

/** The exponent of an operand given as numbers (largest finite |x| over all of them, f32-rounded). */
export function coopScaleExponentOf(values: Iterable<number>): number {
  let m = 0;
  for (const x of values) m = Math.max(m, finiteAbsBits(x));
  return coopScaleExponent(m);
}

/** The output exponents of the store: −(kA+kB) split into two halves of at most 126 in magnitude
 * (applied one after the other; the WGSL computes the same). */
export function coopOutputExponents(kA: number, kB: number): [number, number] {
  const s = kA + kB;
  const h = Math.trunc(s / 2); // WGSL i32 division truncates toward zero
  return [-h, -(s - h)];
}

/**
 * WGSL helpers shared by the coop kernel's prologue and the tests: `coop_scale_exp(max_bits: u32)
 * -> i32` ({@link coopScaleExponent}) and `coop_pow2(k: i32) -> f32` = 2^k for k in [−126, 127],
 * built from its bits (exact).
 */
export const COOP_SCALE_WGSL = /* wgsl */ `
fn coop_scale_exp(max_bits: u32) -> i32 { return min(${127 + COOP_SCALE_TARGET_EXP} - i32(max_bits >> 23u), ${COOP_SCALE_MAX_EXP}); }
fn coop_pow2(k: i32) -> f32 { return bitcast<f32>(u32(k + 127) << 23u); }
`;

/** Uniform parameters of {@link coopAbsMaxLaunch}, in order. */
export const COOP_AMAX_PARAM_NAMES = ["a_off", "a_size", "stride_a", "b_off", "b_size", "stride_b", "batch"] as const;

/** Independent loads each invocation of the max-abs kernels keeps in flight per step of its
 * strided loop (f32 elements, or 32-bit words of two 16-bit elements). */
export const COOP_AMAX_UNROLL = 8;

/**
 * WGSL statements folding the finite |x| bits of elements [start, end) of array `buf` (of `dtype`;
 * element e at index `off` + e) into `m`, as one of the 256 × 256-strided shares of workgroup wg.x,
 * invocation li. Arguments are WGSL expressions (`start`, `end`, `off` u32, evaluated once).
 *
 * Why unrolled: one 4-byte load per invocation per step kept too few bytes in flight for HBM
 * (65536 invocations per operand × 4 B ≈ 0.5 MB, where ~4 TB/s × ~1 µs needs several MB: on the
 * H200 the max-abs ran at ~0.5 TB/s). Each step now issues {@link COOP_AMAX_UNROLL} independent
 * loads, each coalesced across the subgroup (element e + j·65536 for invocation li); 16-bit
 * operands are read as whole 32-bit words (both halves folded, a half outside [start, end) counts
 * 0), so a 16-bit operand costs half the loads. max is exact and order-free, so the partials'
 * maximum is the same bit pattern as a one-element-per-step loop's.
 */
export function coopAbsMaxRangeFold(buf: string, off: string, start: string, end: string, dtype: "f32" | "f16" | "bf16" = "f32"): string {
  const W = COOP_AMAX_PARTIALS, S = W * W, U = COOP_AMAX_UNROLL;
  const max = (xs: string[]): string => (xs.length === 1 ? xs[0]! : `max(${max(xs.slice(0, xs.length >> 1))}, ${max(xs.slice(xs.length >> 1))})`);
  if (dtype === "f32") {
    const at = (j: number) => `finite_abs_bits(${buf}[f_o + f_e${j ? ` + ${j * S}u` : ""}])`;
    return `    {
      let f_o = ${off};
      let f_hi = ${end};
      var f_e = ${start} + wg.x * ${W}u + li;
      while (f_e < f_hi && f_hi - f_e > ${(U - 1) * S}u) {
        m = max(m, ${max(Array.from({ length: U }, (_, j) => at(j)))});
        f_e += ${U * S}u;
      }
      while (f_e < f_hi) { m = max(m, ${at(0)}); f_e += ${S}u; }
    }`;
  }
  // words [f_lo / 2, f_whi) hold elements [f_lo, f_hi) (absolute indices); both halves of each
  // word are folded, the ones outside [f_lo, f_hi) as 0 (interior words have both inside)
  const word = (j: number) => `amax_word(${buf}[f_w${j ? ` + ${j * S}u` : ""}], f_w${j ? ` + ${j * S}u` : ""}, f_lo, f_hi)`;
  return `    {
      let f_lo = ${off} + ${start};
      let f_hi = ${off} + ${end};
      let f_whi = (f_hi + 1u) >> 1u;
      var f_w = (f_lo >> 1u) + wg.x * ${W}u + li;
      if (f_lo < f_hi) {
        while (f_w < f_whi && f_whi - f_w > ${(U - 1) * S}u) {
          m = max(m, ${max(Array.from({ length: U }, (_, j) => word(j)))});
          f_w += ${U * S}u;
        }
        while (f_w < f_whi) { m = max(m, ${word(0)}); f_w += ${S}u; }
      }
    }`.replace(/amax_word\(/g, `amax_word_${dtype}(`);
}

/** WGSL helpers of the 16-bit folds of {@link coopAbsMaxRangeFold}: `amax_word_f16/bf16(word, w,
 * lo, hi)` = the larger finite |x| bits of the two halves of word index w whose element indices lie
 * in [lo, hi) (0 for those outside). Needs the prelude's half_bits / f16_to_f32 / bf16_to_f32. */
export const COOP_AMAX_WORD_WGSL = (["f16", "bf16"] as const).map((d) => `fn amax_word_${d}(x: u32, w: u32, lo: u32, hi: u32) -> u32 {
  let e = 2u * w;
  let a = select(0u, finite_abs_bits(${d}_to_f32(x & 0xffffu)), e >= lo && e < hi);
  let b = select(0u, finite_abs_bits(${d}_to_f32(x >> 16u)), e + 1u >= lo && e + 1u < hi);
  return max(a, b);
}
`).join("");

/**
 * WGSL loop folding the finite |x| bits of `batch` slices of `size` elements, `stride` apart from
 * element `off` of array `buf` (of `dtype`, default f32), into `m` (one of the 256 × 256-strided
 * shares of workgroup wg.x, invocation li; {@link coopAbsMaxRangeFold}). Arguments are WGSL expressions.
 */
export function coopAbsMaxSlicesLoop(buf: string, off: string, size: string, stride: string, batch: string, dtype: "f32" | "f16" | "bf16" = "f32"): string {
  return `    for (var bi = 0u; bi < ${batch}; bi++) {
${coopAbsMaxRangeFold(buf, `${off} + bi * ${stride}`, "0u", size, dtype)}
    }`;
}

/**
 * The WGSL of a max-abs dispatch (workgroups 256 × 2, y = the operand): `loopA` / `loopB` fold their
 * operand's elements into `m` (e.g. {@link coopAbsMaxSlicesLoop}), a fixed-order tree reduction
 * takes the workgroup's maximum, and invocation 0 writes it to `b_amax[y·256 + x]`. `helpers` are
 * module-scope functions, `prologue` statements at the start of main (both for kernels that need
 * more than the bindings, e.g. the grouped products' offsets).
 */
export function coopAbsMaxWGSL(loopA: string, loopB: string, helpers = "", prologue = ""): string {
  const W = COOP_AMAX_PARTIALS;
  return /* wgsl */ `
var<workgroup> amax_red: array<u32, ${W}>;
fn finite_abs_bits(x: f32) -> u32 {
  let u = bitcast<u32>(x) & 0x7fffffffu;
  return select(0u, u, u < 0x7f800000u);
}
${COOP_AMAX_WORD_WGSL}${helpers}@compute @workgroup_size(${W})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
${prologue}  var m = 0u;
  if (wg.y == 0u) {
${loopA}
  } else {
${loopB}
  }
  amax_red[li] = m;
  workgroupBarrier();
  for (var s = ${W / 2}u; s > 0u; s = s >> 1u) {
    if (li < s) { amax_red[li] = max(amax_red[li], amax_red[li + s]); }
    workgroupBarrier();
  }
  if (li == 0u) { b_amax[wg.y * ${W}u + wg.x] = amax_red[0]; }
}`;
}

type FloatDType = "f32" | "f16" | "bf16";

function absMaxKernel(da: FloatDType, db: FloatDType): Kernel {
  const label = da === "f32" && db === "f32" ? "coop_absmax" : `coop_absmax_${da}_${db}`;
  return memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_a", type: bindTypeOf(da), write: false },
      { name: "b_b", type: bindTypeOf(db), write: false },
      { name: "b_amax", type: "u32", write: true },
    ],
    params: u32s(...COOP_AMAX_PARAM_NAMES),
    code: coopAbsMaxWGSL(coopAbsMaxSlicesLoop("b_a", "P.a_off", "P.a_size", "P.stride_a", "P.batch", da), coopAbsMaxSlicesLoop("b_b", "P.b_off", "P.b_size", "P.stride_b", "P.batch", db)),
  }));
}

/**
 * The dispatch that writes the partial maxima of the finite |x| of A and B (f32 bit patterns) into
 * `amax[0..256)` (A) and `amax[256..512)` (B). A's elements are a[aOff + bi·strideA + e] for
 * bi < batch, e < aSize (likewise B), so batch gaps and padding are not read. Workgroups 256 × 2.
 * a and b may each be f32, f16 or bf16 (16-bit values are read exactly as f32).
 * @throws Error unless a and b are f32/f16/bf16 and amax a u32 buffer of at least {@link COOP_AMAX_WORDS}.
 */
export function coopAbsMaxLaunch(a: Buf, aOff: number, aSize: number, strideA: number, b: Buf, bOff: number, bSize: number, strideB: number, batch: number, amax: Buf): Launch {
  const fl = (d: string): d is FloatDType => d === "f32" || d === "f16" || d === "bf16";
  if (!fl(a.dtype) || !fl(b.dtype)) throw new Error(`coop absmax: a and b must be f32, f16 or bf16, got ${a.dtype}/${b.dtype}`);
  if (amax.dtype !== "u32" || amax.length < COOP_AMAX_WORDS) throw new Error(`coop absmax: amax must be a u32 buffer of at least ${COOP_AMAX_WORDS} elements, got ${amax.dtype}[${amax.length}]`);
  return { kernel: absMaxKernel(a.dtype, b.dtype), bufs: [a, b, amax], params: [aOff, aSize, strideA, bOff, bSize, strideB, batch], workgroups: [COOP_AMAX_PARTIALS, 2, 1] };
}
