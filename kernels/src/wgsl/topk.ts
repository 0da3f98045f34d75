/**
 * Top-k over the last axis (k ≤ 8), one invocation per row scanning columns in order and keeping a
 * sorted list by insertion. Descending values; ties keep the lower index first (a later equal
 * value never displaces an earlier one). Slots past `cols` (when cols < k) get −inf and index −1.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, u32s, memoKernel } from "./launch.ts";

/** Largest k supported. */
export const MAX_TOPK = 8;

/** Launch of topk (null for no rows). Throws when k is not in 1…8. */
export function topkLaunch(x: Buf, xoff: number, values: Buf, voff: number, indices: Buf, ioff: number, rows: number, cols: number, k: number): Launch | null {
  if (!Number.isInteger(k) || k < 1 || k > MAX_TOPK) throw new Error(`webgpu topk: k must be an integer in 1…${MAX_TOPK}, got ${k}`);
  if (rows === 0) return null;
  const kernel: Kernel = memoKernel("topk", () => ({
    label: "topk",
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_v", type: "f32", write: true },
      { name: "b_i", type: "i32", write: true },
    ],
    params: u32s("xoff", "voff", "ioff", "rows", "cols", "k"),
    code: `${entry(EW_WG)} {
  let r = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (r >= P.rows) { return; }
  var vals: array<f32, ${MAX_TOPK}>;
  var ids: array<i32, ${MAX_TOPK}>;
  var cnt = 0u;
  let xb = P.xoff + r * P.cols;
  for (var c = 0u; c < P.cols; c = c + 1u) {
    let v = b_x[xb + c];
    if (cnt == P.k && !(v > vals[P.k - 1u])) { continue; }
    var p = min(cnt, P.k - 1u);
    loop {
      if (p == 0u) { break; }
      if (!(vals[p - 1u] < v)) { break; }
      vals[p] = vals[p - 1u];
      ids[p] = ids[p - 1u];
      p = p - 1u;
    }
    vals[p] = v;
    ids[p] = i32(c);
    cnt = min(cnt + 1u, P.k);
  }
  for (var t = 0u; t < P.k; t = t + 1u) {
    if (t < cnt) {
      b_v[P.voff + r * P.k + t] = vals[t];
      b_i[P.ioff + r * P.k + t] = ids[t];
    } else {
      b_v[P.voff + r * P.k + t] = bitcast<f32>(0xff800000u);
      b_i[P.ioff + r * P.k + t] = -1;
    }
  }
}`,
  }));
  return { kernel, bufs: [x, values, indices], params: [xoff, voff, ioff, rows, cols, k], workgroups: groups(rows) };
}
