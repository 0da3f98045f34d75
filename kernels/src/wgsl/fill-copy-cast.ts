/**
 * fill, copy and cast kernels.
 *
 * fill of 32-bit destinations: one invocation per element. Copies and casts into 32-bit
 * destinations: {@link EW_PER_INVOCATION} elements per invocation. 16-bit destinations (two
 * elements per u32 word): {@link EW_PER_INVOCATION} destination *words* per invocation, so no two
 * invocations write the same word; the halves of the first/last word that lie outside the range
 * are kept (read-modify-write by the one owning invocation). Conversions to f16/bf16 round to
 * nearest even (prelude.ts).
 */
import { DTYPE_BYTES, type Buf, type DType } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { bindTypeOf, entry, EW_WG, groups, u32s, memoKernel } from "./launch.ts";
import { floatLoader, toHalfBits } from "./prelude.ts";

const is16 = (d: DType): boolean => DTYPE_BYTES[d] === 2;

/** Destination words (16-bit writers) or elements (32-bit copies) per invocation: independent
 * loads in flight per invocation, each coalesced across the subgroup (invocation li of a workgroup
 * handles li, li + 256, li + 512, li + 768 of its block of 1024). One element per invocation left
 * too few bytes in flight to fill HBM (on the H200 the bf16 ↔ f32 casts of the bf16 jobs ran at
 * ~0.8 TB/s). */
export const EW_PER_INVOCATION = 4;

/** Body of a word writer into 16-bit buffer `b_dst` at `P.doff`, `P.n` elements, {@link
 * EW_PER_INVOCATION} words per invocation; `val16(j)` (defined by the caller) gives the 16 bits of
 * relative element j. A word with both halves in range is written whole; the first and last words,
 * when only one half is in range, are read, merged and written back (only their one owning
 * invocation touches them). Dispatch {@link ewGroups}(words touched). */
export function wordWriter(): string {
  const U = EW_PER_INVOCATION;
  return `${entry(EW_WG)} {
  let t0 = wg_lin(wg, nwg) * ${EW_WG * U}u + li;
  let w0 = P.doff >> 1u;
  let nw = ((P.doff + P.n - 1u) >> 1u) - w0 + 1u;
  let e_end = P.doff + P.n;
  for (var j = 0u; j < ${U}u; j++) {
    let t = t0 + j * ${EW_WG}u;
    if (t < nw) {
      let w = w0 + t;
      let e = 2u * w;
      if (e >= P.doff && e + 1u < e_end) {
        b_dst[w] = (val16(e - P.doff) & 0xffffu) | ((val16(e + 1u - P.doff) & 0xffffu) << 16u);
      } else {
        var word = b_dst[w];
        for (var h = 0u; h < 2u; h = h + 1u) {
          let eh = e + h;
          if (eh >= P.doff && eh < e_end) {
            let sh = 16u * h;
            word = (word & ~(0xffffu << sh)) | ((val16(eh - P.doff) & 0xffffu) << sh);
          }
        }
        b_dst[w] = word;
      }
    }
  }
}`;
}

/** Workgroups for `n` steps at {@link EW_PER_INVOCATION} per invocation. */
export function ewGroups(n: number): number {
  return groups(Math.ceil(n / EW_PER_INVOCATION));
}

/** Number of destination words a 16-bit write of n elements at element offset off touches. */
export function wordsTouched(off: number, n: number): number {
  return n === 0 ? 0 : ((off + n - 1) >> 1) - (off >> 1) + 1;
}

/** Launch filling `n` elements of `dst` from `off` with the raw element bits `bits` (32-bit value
 * bits for f32/i32/u32, 16-bit pattern for f16/bf16). */
export function fillLaunch(dst: Buf, off: number, n: number, bits: number): Launch {
  if (is16(dst.dtype)) {
    const kernel: Kernel = memoKernel("fill16", () => ({
      label: "fill16",
      buffers: [{ name: "b_dst", type: "w16", write: true }],
      params: u32s("doff", "n", "bits"),
      code: `fn val16(j: u32) -> u32 { return P.bits; }\n${wordWriter()}`,
    }));
    return { kernel, bufs: [dst], params: [off, n, bits], workgroups: ewGroups(wordsTouched(off, n)) };
  }
  const kernel: Kernel = memoKernel("fill32", () => ({
    label: "fill32",
    buffers: [{ name: "b_dst", type: "u32", write: true }],
    params: u32s("doff", "n", "bits"),
    code: `${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  b_dst[P.doff + i] = P.bits;
}`,
  }));
  return { kernel, bufs: [dst], params: [off, n, bits >>> 0], workgroups: groups(n) };
}

/** Launch copying n elements src[soff…] → dst[doff…] (same dtype), or converting between float
 * dtypes f32/f16/bf16 when they differ (round to nearest even). Throws on other dtype pairs. */
export function copyCastLaunch(src: Buf, soff: number, dst: Buf, doff: number, n: number): Launch {
  const s = src.dtype;
  const d = dst.dtype;
  const floats: DType[] = ["f32", "f16", "bf16"];
  if (s !== d && !(floats.includes(s) && floats.includes(d))) throw new Error(`webgpu cast: cannot convert ${s} to ${d} (only between f32, f16, bf16)`);
  if (is16(d)) {
    let val: string;
    if (s === d) val = `fn val16(j: u32) -> u32 { let e = P.soff + j; return half_bits(b_src[e >> 1u], e); }`;
    else val = `${floatLoader("ld_src", "b_src", s)}fn val16(j: u32) -> u32 { return ${toHalfBits(d, "ld_src(P.soff + j)")}; }`;
    const kernel: Kernel = memoKernel(`copy_${s}_${d}`, () => ({
      label: `copy_${s}_${d}`,
      buffers: [
        { name: "b_src", type: bindTypeOf(s), write: false },
        { name: "b_dst", type: "w16", write: true },
      ],
      params: u32s("soff", "doff", "n"),
      code: `${val}\n${wordWriter()}`,
    }));
    return { kernel, bufs: [src, dst], params: [soff, doff, n], workgroups: ewGroups(wordsTouched(doff, n)) };
  }
  const expr = s === d ? "b_src[P.soff + i]" : "ld_src(P.soff + i)";
  const kernel: Kernel = memoKernel(`copy_${s}_${d}`, () => ({
    label: `copy_${s}_${d}`,
    buffers: [
      { name: "b_src", type: s === d ? "u32" : bindTypeOf(s), write: false },
      { name: "b_dst", type: s === d ? "u32" : bindTypeOf(d), write: true },
    ],
    params: u32s("soff", "doff", "n"),
    code: `${s === d ? "" : floatLoader("ld_src", "b_src", s)}${entry(EW_WG)} {
  let i0 = wg_lin(wg, nwg) * ${EW_WG * EW_PER_INVOCATION}u + li;
  for (var j = 0u; j < ${EW_PER_INVOCATION}u; j++) {
    let i = i0 + j * ${EW_WG}u;
    if (i < P.n) { b_dst[P.doff + i] = ${expr}; }
  }
}`,
  }));
  return { kernel, bufs: [src, dst], params: [soff, doff, n], workgroups: ewGroups(n) };
}
