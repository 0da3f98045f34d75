/**
 * Operand preparation of the tensor-core attention (attention-coop.ts): every f32 tensor that
 * enters a cooperative-matrix product (q, k, v; in the backward also dout) is scaled by a power of
 * two and rounded to f16 into a head-major, zero-padded copy, once per call.
 *
 * - Scaling: the partial maxima of the finite |x| of each tensor come from matmul-coop-scale.ts's
 *   coopAbsMaxLaunch (two tensors per dispatch); {@link attentionCoopExponentsLaunch} reduces them
 *   to one exponent per tensor, k = coop_scale_exp(max) (max·2^k ∈ [2^14, 2^15), so nothing finite
 *   overflows f16 and every element keeps f16's 11 significant bits over its top 2^24 of range,
 *   whatever the tensor's magnitude — bf16 jobs' gradients reach ~1e-7, below f16's normal range).
 *   The attention kernels read the four exponents and undo them exactly (powers of two) in f32.
 * - Layout: a tensor [B, S, Hx, D] (q, dout: Hx = H; k, v: Hx = Hkv) becomes halves
 *   [B, Hx, Sp, D] with Sp = S rounded up to the kernels' largest block and rows s ≥ S zero, so a
 *   16×16 fragment at any block position lies inside the copy and reads zeros past the sequence:
 *   the kernels load fragments straight from it without guards, each head's rows contiguous
 *   (row stride D halves, 16-byte aligned for D a multiple of 8).
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { memoKernel, u32s } from "./launch.ts";
import { COOP_AMAX_PARTIALS, COOP_SCALE_WGSL } from "./matmul-coop-scale.ts";

/** Index of each tensor's exponent in the exponent buffer written by {@link attentionCoopExponentsLaunch}. */
export const ATTN_EXP = { q: 0, k: 1, v: 2, dout: 3 } as const;

/** u32 words of the exponent buffer (one i32 bit pattern per tensor). */
export const ATTN_EXP_WORDS = 4;

const WG = 256;

/**
 * The one-workgroup dispatch reducing two partial-maxima buffers of coopAbsMaxLaunch (`amaxA`:
 * q's then k's 256 partials; `amaxB`: v's then dout's) to the four exponents, written as i32 bit
 * patterns to `exps[0..4)` in {@link ATTN_EXP} order. Fixed-order tree reduction (deterministic).
 */
export function attentionCoopExponentsLaunch(amaxA: Buf, amaxB: Buf, exps: Buf): Launch {
  if (COOP_AMAX_PARTIALS !== WG) throw new Error(`attention coop exponents: expected ${WG} partial maxima per tensor, the scale module has ${COOP_AMAX_PARTIALS}`);
  const kernel: Kernel = memoKernel("attention_coop_exps", () => ({
    label: "attention_coop_exps",
    buffers: [
      { name: "b_amax_a", type: "u32", write: false },
      { name: "b_amax_b", type: "u32", write: false },
      { name: "b_exps", type: "u32", write: true },
    ],
    params: [],
    code: `${COOP_SCALE_WGSL}
var<workgroup> red: array<vec4<u32>, ${WG}>;
@compute @workgroup_size(${WG}) fn main(@builtin(local_invocation_index) li: u32) {
  red[li] = vec4<u32>(b_amax_a[li], b_amax_a[${WG}u + li], b_amax_b[li], b_amax_b[${WG}u + li]);
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (li < s) { red[li] = max(red[li], red[li + s]); }
    workgroupBarrier();
  }
  if (li < 4u) { b_exps[li] = bitcast<u32>(coop_scale_exp(red[0][li])); }
}`,
  }));
  return { kernel, bufs: [amaxA, amaxB, exps], params: [], workgroups: [1, 1, 1] };
}

/** Padded sequence length of the packed copies: S rounded up to a multiple of `pad` (≥ 16). */
export function attentionPackedRows(S: number, pad: number): number {
  return Math.ceil(S / pad) * pad;
}

/** Halves of one packed tensor of B·Hx heads at head dim D. */
export function attentionPackedHalves(B: number, Hx: number, Sp: number, D: number): number {
  return B * Hx * Sp * D;
}

/**
 * The dispatch packing `src` (f32 [B, S, Hx, D] from element `srcOff`) into `dst` (16-bit buffer,
 * ≥ {@link attentionPackedHalves} halves from element 0) as f16(x·2^k) in the layout of the file
 * comment, k = exps[which] (i32 bits, {@link attentionCoopExponentsLaunch}); rounding to nearest
 * even (prelude.ts f32_to_f16). One invocation per u32 word (two halves); D must be even.
 * @throws Error for a source that is not f32, a destination that is not 16-bit or too short, or odd D.
 */
export function attentionCoopPackLaunch(src: Buf, srcOff: number, dst: Buf, exps: Buf, which: number, B: number, S: number, Hx: number, D: number, Sp: number): Launch | null {
  if (src.dtype !== "f32") throw new Error(`attention coop pack: source must be f32, got ${src.dtype}`);
  if (dst.dtype !== "f16" && dst.dtype !== "bf16") throw new Error(`attention coop pack: destination must be a 16-bit buffer, got ${dst.dtype}`);
  if (D % 2 !== 0) throw new Error(`attention coop pack: head dim must be even, got ${D}`);
  const halves = attentionPackedHalves(B, Hx, Sp, D);
  if (dst.length < halves) throw new Error(`attention coop pack: destination holds ${dst.length} halves, ${halves} needed`);
  const words = halves / 2;
  if (words === 0) return null;
  const kernel: Kernel = memoKernel("attention_coop_pack", () => ({
    label: "attention_coop_pack",
    buffers: [
      { name: "b_src", type: "f32", write: false },
      { name: "b_exps", type: "u32", write: false },
      { name: "b_dst", type: "u32", write: true },
    ],
    params: u32s("src_off", "S", "Hx", "D", "Sp", "which", "words"),
    code: `${COOP_SCALE_WGSL}
@compute @workgroup_size(${WG}) fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let w = wg_lin(wg, nwg) * ${WG}u + li;
  if (w >= P.words) { return; }
  let s2 = coop_pow2(bitcast<i32>(b_exps[P.which]));
  let hw = P.D / 2u;
  let d = (w % hw) * 2u;
  let row = w / hw; // (b·Hx + hx)·Sp + s
  let s = row % P.Sp;
  let bh = row / P.Sp;
  let hx = bh % P.Hx;
  let b = bh / P.Hx;
  var word = 0u;
  if (s < P.S) {
    let g = P.src_off + ((b * P.S + s) * P.Hx + hx) * P.D + d;
    word = f32_to_f16(b_src[g] * s2) | (f32_to_f16(b_src[g + 1u] * s2) << 16u);
  }
  b_dst[w] = word;
}`,
  }));
  return { kernel, bufs: [src, exps, dst], params: [srcOff, S, Hx, D, Sp, which, words], workgroups: Math.ceil(words / WG) };
}
