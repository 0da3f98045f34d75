/**
 * Strided 2-D copy of 32-bit elements: rows × cols from src (rows `sld` apart) to dst (rows `dld`
 * apart), one invocation per element. The webgpu backend gathers a column block of a matrix into
 * a contiguous temporary (and scatters a result block back) with it when a matmul's operands are
 * split across buffer segments (webgpu/segmented-matmul.ts).
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
