/**
 * Copies the webgpu backend needs when it splits ops over buffer segments (webgpu/segments.ts):
 *
 * - a strided 2-D copy of 32-bit elements: rows × cols from src (rows `sld` apart) to dst (rows
 *   `dld` apart), one invocation per element — a column block of a matrix gathered into a
 *   contiguous temporary, a result block scattered back (webgpu/segmented-matmul.ts);
 * - a shifted copy of i32 row offsets (out[i] = in[i] − shift), so a grouped product with device
 *   offsets runs on a block of its rows (webgpu/backend.ts groupedMatmulDev).
 */
import { DTYPE_BYTES, type Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, u32s, memoKernel } from "./launch.ts";

/** Launch of dst[doff + r·dld + c] = src[soff + r·sld + c] for r < rows, c < cols (32-bit
 * dtypes, the same on both sides; src and dst distinct buffers). Throws on a 16-bit dtype. */
export function copy2dLaunch(src: Buf, soff: number, sld: number, dst: Buf, doff: number, dld: number, rows: number, cols: number): Launch | null {
  if (DTYPE_BYTES[src.dtype] !== 4 || src.dtype !== dst.dtype) throw new Error(`webgpu copy2d: needs the same 32-bit dtype on both sides, got ${src.dtype} → ${dst.dtype}`);
  const total = rows * cols;
  if (total === 0) return null;
  const kernel: Kernel = memoKernel("copy2d", () => ({
    label: "copy2d",
    buffers: [
      { name: "b_src", type: "u32", write: false },
      { name: "b_dst", type: "u32", write: true },
    ],
    params: u32s("soff", "sld", "doff", "dld", "rows", "cols"),
    code: `${entry(EW_WG)} {
  let t = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (t >= P.rows * P.cols) { return; }
  let r = t / P.cols;
  let c = t % P.cols;
  b_dst[P.doff + r * P.dld + c] = b_src[P.soff + r * P.sld + c];
}`,
  }));
  return { kernel, bufs: [src, dst], params: [soff, sld, doff, dld, rows, cols], workgroups: groups(total) };
}

/** Launch of out[ooff + i] = in[ioff + i] − shift for i < n (i32). */
export function shiftI32Launch(src: Buf, soff: number, dst: Buf, doff: number, n: number, shift: number): Launch | null {
  if (n === 0) return null;
  const kernel: Kernel = memoKernel("shift_i32", () => ({
    label: "shift_i32",
    buffers: [
      { name: "b_src", type: "i32", write: false },
      { name: "b_dst", type: "i32", write: true },
    ],
    params: [...u32s("soff", "doff", "n"), { name: "shift", type: "i32" as const }],
    code: `${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  b_dst[P.doff + i] = b_src[P.soff + i] - P.shift;
}`,
  }));
  return { kernel, bufs: [src, dst], params: [soff, doff, n, shift], workgroups: groups(n) };
}
