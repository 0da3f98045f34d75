/**
 * Histogram of i32 indices into u32 counts with `atomicAdd` (integer atomics commute, so the
 * result is deterministic). The caller zeroes `counts` first (fill kernel); out-of-range indices
 * are ignored.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, u32s, memoKernel } from "./launch.ts";

/** Launch adding one count per index (counts must already be zero where wanted). */
export function histogramLaunch(idx: Buf, ioff: number, counts: Buf, coff: number, n: number, bins: number): Launch | null {
  if (n === 0) return null;
  const kernel: Kernel = memoKernel("histogram", () => ({
    label: "histogram",
    buffers: [
      { name: "b_idx", type: "i32", write: false },
      { name: "b_c", type: "atomic", write: true },
    ],
    params: u32s("ioff", "coff", "n", "bins"),
    code: `${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i >= P.n) { return; }
  let b = b_idx[P.ioff + i];
  if (b >= 0 && u32(b) < P.bins) { atomicAdd(&b_c[P.coff + u32(b)], 1u); }
}`,
  }));
  return { kernel, bufs: [idx, counts], params: [ioff, coff, n, bins], workgroups: groups(n) };
}
