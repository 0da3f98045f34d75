/**
 * Row gather and deterministic row scatter-add (MoE dispatch/combine, embedding lookup/backward).
 *
 * gather: out[i, :] = x[idx[i], :]; idx −1 or past the table gives a zero row. One invocation per
 * element.
 *
 * scatter-add: out[idx[i], :] += s_i · x[i, :] with i ascending per destination row, without float
 * atomics, in two dispatches:
 *   1. a stable sort of row numbers 0…n−1 by key idx[i] (invalid keys → −1, sorted first): a
 *      bottom-up merge sort of ⌈log2 n⌉ passes over a ping-pong scratch of 2n u32 words, each pass
 *      one invocation per element placing it by binary search in the partner run (its rank in
 *      its own run + the partner's keys below it: strictly below for the left run, at or below
 *      for the right, which keeps equal keys in index order — "merge path" placement);
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

/** Launch of a gather from one block of table rows (a table held in several buffer segments,
 * webgpu/segments.ts): for i < n with lo ≤ idx[i] < lo + cnt, out[ooff + i·dim + c] =
 * x[xoff + (idx[i] − lo)·dim + c]; other rows of out are left untouched. */
export function gatherRowsRangeLaunch(x: Buf, xoff: number, lo: number, cnt: number, idx: Buf, ioff: number, out: Buf, ooff: number, n: number, dim: number): Launch | null {
  const total = n * dim;
  if (total === 0 || cnt === 0) return null;
  const kernel: Kernel = memoKernel("gather_rows_range", () => ({
    label: "gather_rows_range",
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_idx", type: "i32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("xoff", "lo", "cnt", "ioff", "ooff", "n", "dim"),
    code: `${entry(EW_WG)} {
  let t = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (t >= P.n * P.dim) { return; }
  let i = t / P.dim;
  let c = t % P.dim;
  let id = b_idx[P.ioff + i];
  if (id < 0 || u32(id) < P.lo || u32(id) - P.lo >= P.cnt) { return; }
  b_out[P.ooff + t] = b_x[P.xoff + (u32(id) - P.lo) * P.dim + c];
}`,
  }));
  return { kernel, bufs: [x, idx, out], params: [xoff, lo, cnt, ioff, ooff, n, dim], workgroups: groups(total) };
}

/** Words of scratch the scatter-add sort needs for n rows. */
export function scatterScratchWords(n: number): number {
  return Math.max(1, 2 * n);
}

/** Launches of scatterAddRows (see file doc). `outRows`: rows available in out from ooff;
 * `scratch`: u32 buffer of ≥ {@link scatterScratchWords}(n) words. `weights` null → scale 1.
 * `base`: the destination row of out's first row (a block of a table held in several buffer
 * segments, webgpu/segments.ts): index k lands in out row k − base, indices outside
 * [base, base + outRows) are skipped. */
export function scatterAddRowsLaunches(x: Buf, xoff: number, idx: Buf, ioff: number, weights: Buf | null, woff: number, out: Buf, ooff: number, outRows: number, n: number, dim: number, scratch: Buf, base = 0): Launch[] {
  if (n === 0 || dim === 0) return [];
  const key = `fn key(i: u32) -> i32 { let k = b_idx[P.ioff + i]; if (k < 0 || u32(k) < P.base || u32(k) - P.base >= P.outRows) { return -1; } return k - i32(P.base); }\n`;
  const init: Kernel = memoKernel("scatter_sort_init", () => ({
    label: "scatter_sort_init",
    buffers: [{ name: "b_ord", type: "u32", write: true }],
    params: u32s("n"),
    code: `${entry(EW_WG)} {
  let i = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (i < P.n) { b_ord[i] = i; }
}`,
  }));
  const merge: Kernel = memoKernel("scatter_sort_merge", () => ({
    label: "scatter_sort_merge",
    buffers: [
      { name: "b_idx", type: "i32", write: false },
      { name: "b_ord", type: "u32", write: true },
    ],
    params: u32s("ioff", "n", "outRows", "w", "src", "dst", "base"),
    code: `${key}
// number of positions q in [a, b) of the source run with key(ord[q]) < k (strict) or <= k
fn count_below(a: u32, b: u32, k: i32, strict: bool) -> u32 {
  var lo = a;
  var hi = b;
  loop {
    if (lo >= hi) { break; }
    let m = (lo + hi) / 2u;
    let km = key(b_ord[P.src + m]);
    if ((strict && km < k) || (!strict && km <= k)) { lo = m + 1u; } else { hi = m; }
  }
  return lo - a;
}
${entry(EW_WG)} {
  let p = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (p >= P.n) { return; }
  let lo = (p / (2u * P.w)) * (2u * P.w);
  let mid = min(lo + P.w, P.n);
  let hi = min(lo + 2u * P.w, P.n);
  let e = b_ord[P.src + p];
  let k = key(e);
  var pos: u32;
  if (p < mid) { pos = p + count_below(mid, hi, k, true); } else { pos = lo + (p - mid) + count_below(lo, mid, k, false); }
  b_ord[P.dst + pos] = e;
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
    params: u32s("ioff", "n", "outRows", "xoff", "woff", "ooff", "dim", "ordoff", "base"),
    code: `${key}${entry(EW_WG)} {
  let t = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (t >= P.n * P.dim) { return; }
  let p = t / P.dim;
  let c = t % P.dim;
  let k = key(b_ord[P.ordoff + p]);
  if (k < 0) { return; }
  if (p > 0u && key(b_ord[P.ordoff + p - 1u]) == k) { return; }
  let o = P.ooff + u32(k) * P.dim + c;
  var acc = b_out[o];
  for (var q = p; q < P.n; q = q + 1u) {
    let i = b_ord[P.ordoff + q];
    if (key(i) != k) { break; }
    acc = acc + ${hasW ? "b_w[P.woff + i] * " : ""}b_x[P.xoff + i * P.dim + c];
  }
  b_out[o] = acc;
}`,
  }));
  const launches: Launch[] = [{ kernel: init, bufs: [scratch], params: [n], workgroups: groups(n) }];
  let src = 0;
  for (let w = 1; w < n; w *= 2) {
    const dst = src === 0 ? n : 0;
    launches.push({ kernel: merge, bufs: [idx, scratch], params: [ioff, n, outRows, w, src, dst, base], workgroups: groups(n) });
    src = dst;
  }
  launches.push({ kernel: apply, bufs: hasW ? [x, idx, scratch, weights, out] : [x, idx, scratch, out], params: [ioff, n, outRows, xoff, woff, ooff, dim, src, base], workgroups: groups(n * dim) });
  return launches;
}
