/**
 * Row gather and deterministic row scatter-add (MoE dispatch/combine, embedding lookup/backward).
 *
 * gather: out[i, :] = x[idx[i], :]; idx −1 or past the table gives a zero row. One invocation per
 * element.
 *
 * scatter-add: out[idx[i], :] += s_i · x[i, :] with i ascending per destination row, without float
 * atomics, in two dispatches:
 *   1. a stable sort of row numbers 0…n−1 by key idx[i] (invalid keys → −1, sorted first), as a
 *      bottom-up merge sort run by one invocation (O(n log n) steps; n is a token count) into a
 *      scratch u32 buffer of 2n words;
 *   2. one invocation per (sorted position p, column c): if p starts a run of equal valid keys, it
 *      adds the run's rows in order into out[key, c] (acc starts from the current out value, so the
 *      result equals sequential `out += s_i·x_i`).
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, u32s, memoKernel } from "./launch.ts";

/** Launch of gatherRows/embedding: out[ooff + i·dim + c] = x[xoff + idx[i]·dim + c]; rows of x
 * available: `xrows`. */
export function gatherRowsLaunch(x: Buf, xoff: number, xrows: number, idx: Buf, ioff: number, out: Buf, ooff: number, n: number, dim: number): Launch | null {
  const total = n * dim;
  if (total === 0) return null;
  const kernel: Kernel = memoKernel("gather_rows", () => ({
    label: "gather_rows",
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_idx", type: "i32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("xoff", "xrows", "ioff", "ooff", "n", "dim"),
    code: `${entry(EW_WG)} {
  let t = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (t >= P.n * P.dim) { return; }
  let i = t / P.dim;
  let c = t % P.dim;
  let id = b_idx[P.ioff + i];
  var v: f32 = 0.0;
  if (id >= 0 && u32(id) < P.xrows) { v = b_x[P.xoff + u32(id) * P.dim + c]; }
  b_out[P.ooff + t] = v;
}`,
  }));
  return { kernel, bufs: [x, idx, out], params: [xoff, xrows, ioff, ooff, n, dim], workgroups: groups(total) };
}

/** Words of scratch the scatter-add sort needs for n rows. */
export function scatterScratchWords(n: number): number {
  return Math.max(1, 2 * n);
}

/** Launches of scatterAddRows (see file doc). `outRows`: rows available in out from ooff;
 * `scratch`: u32 buffer of ≥ {@link scatterScratchWords}(n) words. `weights` null → scale 1. */
export function scatterAddRowsLaunches(x: Buf, xoff: number, idx: Buf, ioff: number, weights: Buf | null, woff: number, out: Buf, ooff: number, outRows: number, n: number, dim: number, scratch: Buf): Launch[] {
  if (n === 0 || dim === 0) return [];
  const key = `fn key(i: u32) -> i32 { let k = b_idx[P.ioff + i]; if (k < 0 || u32(k) >= P.outRows) { return -1; } return k; }\n`;
  const sort: Kernel = memoKernel("scatter_sort", () => ({
    label: "scatter_sort",
    buffers: [
      { name: "b_idx", type: "i32", write: false },
      { name: "b_ord", type: "u32", write: true },
    ],
    params: u32s("ioff", "n", "outRows"),
    code: `${key}@compute @workgroup_size(1) fn main() {
  let n = P.n;
  for (var i = 0u; i < n; i = i + 1u) { b_ord[i] = i; }
  var src = 0u;
  var dst = n;
  for (var w = 1u; w < n; w = w * 2u) {
    for (var lo = 0u; lo < n; lo = lo + 2u * w) {
      let mid = min(lo + w, n);
      let hi = min(lo + 2u * w, n);
      var a = lo;
      var b = mid;
      for (var o = lo; o < hi; o = o + 1u) {
        var takeA = a < mid;
        if (takeA && b < hi) { takeA = key(b_ord[src + a]) <= key(b_ord[src + b]); }
        if (takeA) { b_ord[dst + o] = b_ord[src + a]; a = a + 1u; } else { b_ord[dst + o] = b_ord[src + b]; b = b + 1u; }
      }
    }
    let t = src; src = dst; dst = t;
  }
  if (src != 0u) { for (var i = 0u; i < n; i = i + 1u) { b_ord[i] = b_ord[src + i]; } }
}`,
  }));
  const hasW = weights !== null;
  const apply: Kernel = memoKernel(hasW ? "scatter_add_weighted" : "scatter_add", () => ({
    label: hasW ? "scatter_add_weighted" : "scatter_add",
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_idx", type: "i32", write: false },
      { name: "b_ord", type: "u32", write: false },
      ...(hasW ? [{ name: "b_w", type: "f32" as const, write: false }] : []),
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("ioff", "n", "outRows", "xoff", "woff", "ooff", "dim"),
    code: `${key}${entry(EW_WG)} {
  let t = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (t >= P.n * P.dim) { return; }
  let p = t / P.dim;
  let c = t % P.dim;
  let k = key(b_ord[p]);
  if (k < 0) { return; }
  if (p > 0u && key(b_ord[p - 1u]) == k) { return; }
  let o = P.ooff + u32(k) * P.dim + c;
  var acc = b_out[o];
  for (var q = p; q < P.n; q = q + 1u) {
    let i = b_ord[q];
    if (key(i) != k) { break; }
    acc = acc + ${hasW ? "b_w[P.woff + i] * " : ""}b_x[P.xoff + i * P.dim + c];
  }
  b_out[o] = acc;
}`,
  }));
  const p = [ioff, n, outRows];
  return [
    { kernel: sort, bufs: [idx, scratch], params: p, workgroups: [1, 1, 1] },
    { kernel: apply, bufs: hasW ? [x, idx, scratch, weights, out] : [x, idx, scratch, out], params: [...p, xoff, woff, ooff, dim], workgroups: groups(n * dim) },
  ];
}
