/**
 * Sum of squares (for the global gradient norm) and the non-finite check (fp16 overflow detection).
 *
 * sumSquares is deterministic by construction: pass 1 gives each workgroup a fixed chunk of
 * CHUNK elements (invocation t sums t, t+256, … in order; then a fixed tree), writing one partial
 * per chunk to scratch; pass 2 is one workgroup summing the partials the same way. The grouping
 * depends only on n, never on scheduling.
 *
 * nonFinite tests exponent bits (all ones = inf or NaN) rather than comparing floats, which
 * optimising shader compilers may fold away; any hit sets out[0] with atomicOr (the caller zeroes
 * it first).
 */
import type { Buf, DType } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { bindTypeOf, entry, EW_WG, groups, u32s, memoKernel } from "./launch.ts";
import { floatLoader } from "./prelude.ts";
import { treeReduce } from "./workgroup-reduce.ts";

/** Elements per pass-1 workgroup of sumSquares. */
export const SUMSQ_CHUNK = EW_WG * 16;

/** Partials (scratch f32 elements) sumSquares needs for n elements. */
export function sumSquaresPartials(n: number): number {
  return Math.max(1, Math.ceil(n / SUMSQ_CHUNK));
}

/** Launches of sumSquares: out[ooff] = Σ x². `scratch`: f32 buffer of ≥ sumSquaresPartials(n). */
export function sumSquaresLaunches(x: Buf, xoff: number, out: Buf, ooff: number, n: number, scratch: Buf): Launch[] {
  const np = sumSquaresPartials(n);
  const d: DType = x.dtype;
  const pass1: Kernel = memoKernel(`sumsq_partial_${d}`, () => ({
    label: `sumsq_partial_${d}`,
    buffers: [
      { name: "b_x", type: bindTypeOf(d), write: false },
      { name: "b_part", type: "f32", write: true },
    ],
    params: u32s("xoff", "n", "np"),
    code: `${floatLoader("ld_x", "b_x", d)}${treeReduce(EW_WG)}${entry(EW_WG)} {
  let g = wg_lin(wg, nwg);
  if (g >= P.np) { return; }
  let base = g * ${SUMSQ_CHUNK}u;
  var s: f32 = 0.0;
  for (var r = 0u; r < ${SUMSQ_CHUNK / EW_WG}u; r = r + 1u) {
    let e = base + li + ${EW_WG}u * r;
    if (e < P.n) { let v = ld_x(P.xoff + e); s = s + v * v; }
  }
  s = wg_sum(li, s);
  if (li == 0u) { b_part[g] = s; }
}`,
  }));
  const pass2: Kernel = memoKernel("sumsq_final", () => ({
    label: "sumsq_final",
    buffers: [
      { name: "b_part", type: "f32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("np", "ooff"),
    code: `${treeReduce(EW_WG)}${entry(EW_WG)} {
  var s: f32 = 0.0;
  for (var e = li; e < P.np; e = e + ${EW_WG}u) { s = s + b_part[e]; }
  s = wg_sum(li, s);
  if (li == 0u) { b_out[P.ooff] = s; }
}`,
  }));
  return [
    { kernel: pass1, bufs: [x, scratch], params: [xoff, n, np], workgroups: np },
    { kernel: pass2, bufs: [scratch, out], params: [np, ooff], workgroups: [1, 1, 1] },
  ];
}

/** Launch setting out[ooff] |= 1 when any of n elements of x is inf/NaN (out zeroed beforehand). */
export function nonFiniteLaunch(x: Buf, xoff: number, out: Buf, ooff: number, n: number): Launch | null {
  if (n === 0) return null;
  const d: DType = x.dtype;
  let test: string;
  if (d === "f32") test = "(b_x[P.xoff + i] & 0x7f800000u) == 0x7f800000u"; // bound as u32: the raw bits
  else if (d === "f16") test = "(half_bits(b_x[(P.xoff + i) >> 1u], P.xoff + i) & 0x7c00u) == 0x7c00u";
  else if (d === "bf16") test = "(half_bits(b_x[(P.xoff + i) >> 1u], P.xoff + i) & 0x7f80u) == 0x7f80u";
  else throw new Error(`webgpu nonFinite: x must be f32, f16 or bf16, got ${d}`);
  const kernel: Kernel = memoKernel(`nonfinite_${d}`, () => ({
    label: `nonfinite_${d}`,
    buffers: [
      { name: "b_x", type: d === "f32" ? "u32" : "w16", write: false },
      { name: "b_out", type: "atomic", write: true },
    ],
    params: u32s("xoff", "ooff", "n"),
    code: `${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  if (${test}) { atomicOr(&b_out[P.ooff], 1u); }
}`,
  }));
  return { kernel, bufs: [x, out], params: [xoff, ooff, n], workgroups: groups(n) };
}
