/**
 * The MoE permutation and combine on the device (`Backend.moePermute`, `Backend.moeCombine`):
 * a stable counting sort of the (token, slot) pairs by expert — histogram, exclusive prefix sum,
 * scatter — in three dispatches without atomics, so the order is deterministic (pairs of one
 * expert keep pair order = token order), and the per-token weighted sum of the expert rows.
 *
 * Permutation (n pairs, `bins` experts, chunks of PERM_CHUNK pairs):
 *   1. `moe_perm_count`  one invocation per chunk c: cnt[c, e] = pairs of chunk c routed to e;
 *   2. `moe_perm_scan`   one workgroup: per expert e (an invocation each, strided) the exclusive
 *                        prefix over chunks → cnt[c, e], and counts[e]; then invocation 0 takes
 *                        the exclusive prefix over experts → offsets[0…bins]; then every column
 *                        is shifted by offsets[e] (so cnt[c, e] = first row of chunk c's pairs
 *                        of expert e);
 *   3. `moe_perm_scatter` one invocation per chunk, pairs in order: row = cnt[c, e]++;
 *                        rowOfPair[p] = row, tokenOfRow[row] = p / topK, pairOfRow[row] = p;
 *                        a pair with expert −1 (dropped) or outside [0, bins) gets row −1; rows
 *                        past offsets[bins] (the kept total) get token and pair −1.
 * (Megatron-Core's `permute` / torchtitan's `generate_permute_indices`, written as the
 * histogram + scan + scatter of a counting sort.)
 *
 * Combine (`moe_combine`, one invocation per output element (t, c)): the rows of token t's k
 * pairs, ascending (= experts ascending, HF's summation order), are added to acc in turn:
 * acc = (accumulate ? out[t, c] : 0) + w_p·x[row, c] (w_p = 1 without weights); pairs with row
 * −1 are skipped. The same kernel is the backward of the dispatch gather (rows back to tokens).
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, groups, memoKernel, u32s } from "./launch.ts";

/** Pairs per chunk of the counting sort. */
export const PERM_CHUNK = 64;
/** Largest k of {@link moeCombineLaunch} (the per-token slot sort is in registers). */
export const MAX_COMBINE_K = 8;

/** Words of scratch (i32) the permutation needs for n pairs over `bins` experts. */
export function permuteScratchWords(n: number, bins: number): number {
  return Math.max(1, Math.ceil(n / PERM_CHUNK) * bins);
}

const validExpert = "fn expert_of(p: u32) -> i32 { let e = b_idx[P.ioff + p]; if (e < 0 || u32(e) >= P.bins) { return -1; } return e; }";

/** The three launches of the permutation (empty when n = 0 and bins = 0). `scratch` is an i32
 * buffer of ≥ {@link permuteScratchWords} words. Outputs: counts [bins], offsets [bins + 1],
 * rowOfPair [n], tokenOfRow [n], pairOfRow [n] (all i32). */
export function moePermuteLaunches(idx: Buf, ioff: number, n: number, topK: number, bins: number, counts: Buf, coff: number, offsets: Buf, ooff: number, rowOfPair: Buf, rpoff: number, tokenOfRow: Buf, troff: number, pairOfRow: Buf, proff: number, scratch: Buf): Launch[] {
  const nch = Math.ceil(n / PERM_CHUNK);
  const count: Kernel = memoKernel("moe_perm_count", () => ({
    label: "moe_perm_count",
    buffers: [
      { name: "b_idx", type: "i32", write: false },
      { name: "b_cnt", type: "i32", write: true },
    ],
    params: u32s("ioff", "n", "bins", "nch"),
    code: `${validExpert}
${entry(EW_WG)} {
  let c = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (c >= P.nch) { return; }
  for (var e = 0u; e < P.bins; e = e + 1u) { b_cnt[c * P.bins + e] = 0; }
  let p1 = min((c + 1u) * ${PERM_CHUNK}u, P.n);
  for (var p = c * ${PERM_CHUNK}u; p < p1; p = p + 1u) {
    let e = expert_of(p);
    if (e >= 0) { b_cnt[c * P.bins + u32(e)] = b_cnt[c * P.bins + u32(e)] + 1; }
  }
}`,
  }));
  const scan: Kernel = memoKernel("moe_perm_scan", () => ({
    label: "moe_perm_scan",
    buffers: [
      { name: "b_cnt", type: "i32", write: true },
      { name: "b_counts", type: "i32", write: true },
      { name: "b_offsets", type: "i32", write: true },
    ],
    params: u32s("coff", "ooff", "bins", "nch"),
    code: `${entry(EW_WG)} {
  for (var e = li; e < P.bins; e = e + ${EW_WG}u) {
    var run = 0;
    for (var c = 0u; c < P.nch; c = c + 1u) {
      let v = b_cnt[c * P.bins + e];
      b_cnt[c * P.bins + e] = run;
      run = run + v;
    }
    b_counts[P.coff + e] = run;
  }
  storageBarrier();
  workgroupBarrier();
  if (li == 0u) {
    var acc = 0;
    for (var e = 0u; e < P.bins; e = e + 1u) {
      b_offsets[P.ooff + e] = acc;
      acc = acc + b_counts[P.coff + e];
    }
    b_offsets[P.ooff + P.bins] = acc;
  }
  storageBarrier();
  workgroupBarrier();
  for (var e = li; e < P.bins; e = e + ${EW_WG}u) {
    let base = b_offsets[P.ooff + e];
    for (var c = 0u; c < P.nch; c = c + 1u) { b_cnt[c * P.bins + e] = b_cnt[c * P.bins + e] + base; }
  }
}`,
  }));
  const scatter: Kernel = memoKernel("moe_perm_scatter", () => ({
    label: "moe_perm_scatter",
    buffers: [
      { name: "b_idx", type: "i32", write: false },
      { name: "b_cnt", type: "i32", write: true },
      { name: "b_offsets", type: "i32", write: false },
      { name: "b_rp", type: "i32", write: true },
      { name: "b_tr", type: "i32", write: true },
      { name: "b_pr", type: "i32", write: true },
    ],
    params: u32s("ioff", "n", "bins", "nch", "topk", "ooff", "rpoff", "troff", "proff"),
    code: `${validExpert}
${entry(EW_WG)} {
  let c = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (c >= P.nch) { return; }
  let kept = u32(b_offsets[P.ooff + P.bins]);
  let p0 = c * ${PERM_CHUNK}u;
  let p1 = min(p0 + ${PERM_CHUNK}u, P.n);
  // rows of this chunk's range past the kept total hold no pair
  for (var r = max(p0, kept); r < p1; r = r + 1u) {
    b_tr[P.troff + r] = -1;
    b_pr[P.proff + r] = -1;
  }
  for (var p = p0; p < p1; p = p + 1u) {
    let e = expert_of(p);
    if (e < 0) {
      b_rp[P.rpoff + p] = -1;
      continue;
    }
    let s = c * P.bins + u32(e);
    let row = b_cnt[s];
    b_cnt[s] = row + 1;
    b_rp[P.rpoff + p] = row;
    b_tr[P.troff + u32(row)] = i32(p / P.topk);
    b_pr[P.proff + u32(row)] = i32(p);
  }
}`,
  }));
  const launches: Launch[] = [];
  if (nch > 0 && bins > 0) launches.push({ kernel: count, bufs: [idx, scratch], params: [ioff, n, bins, nch], workgroups: groups(nch) });
  launches.push({ kernel: scan, bufs: [scratch, counts, offsets], params: [coff, ooff, bins, nch], workgroups: 1 });
  if (nch > 0) launches.push({ kernel: scatter, bufs: [idx, scratch, offsets, rowOfPair, tokenOfRow, pairOfRow], params: [ioff, n, bins, nch, topK, ooff, rpoff, troff, proff], workgroups: groups(nch) });
  return launches;
}

/** Launch of the combine (file comment): x [xrows, dim] rows, rowOfPair [tokens·topK], weights
 * [tokens·topK] or null, out [tokens, dim]. Null when there is nothing to write. */
export function moeCombineLaunch(x: Buf, xoff: number, xrows: number, rowOfPair: Buf, rpoff: number, weights: Buf | null, woff: number, out: Buf, ooff: number, tokens: number, topK: number, dim: number, accumulate: boolean): Launch | null {
  if (!Number.isInteger(topK) || topK < 1 || topK > MAX_COMBINE_K) throw new Error(`webgpu moeCombine: topK must be an integer in 1…${MAX_COMBINE_K}, got ${topK}`);
  if (tokens * dim === 0) return null;
  const hasW = weights !== null;
  const label = `moe_combine_${hasW ? "w" : "1"}_${accumulate ? "acc" : "set"}`;
  const kernel: Kernel = memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_rp", type: "i32", write: false },
      ...(hasW ? [{ name: "b_w", type: "f32" as const, write: false }] : []),
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("xoff", "xrows", "rpoff", "woff", "ooff", "tokens", "topk", "dim"),
    code: `${entry(EW_WG)} {
  let t = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (t >= P.tokens * P.dim) { return; }
  let tok = t / P.dim;
  let col = t % P.dim;
  // the token's pairs sorted by row (insertion sort of ≤ ${MAX_COMBINE_K} entries)
  var rows: array<i32, ${MAX_COMBINE_K}>;
  var pairs: array<u32, ${MAX_COMBINE_K}>;
  var m = 0u;
  for (var s = 0u; s < P.topk; s = s + 1u) {
    let p = tok * P.topk + s;
    let r = b_rp[P.rpoff + p];
    if (r < 0 || u32(r) >= P.xrows) { continue; }
    var q = m;
    loop {
      if (q == 0u) { break; }
      if (rows[q - 1u] <= r) { break; }
      rows[q] = rows[q - 1u];
      pairs[q] = pairs[q - 1u];
      q = q - 1u;
    }
    rows[q] = r;
    pairs[q] = p;
    m = m + 1u;
  }
  let o = P.ooff + t;
  var acc: f32 = ${accumulate ? "b_out[o]" : "0.0"};
  for (var q = 0u; q < m; q = q + 1u) {
    acc = acc + ${hasW ? "b_w[P.woff + pairs[q]] * " : ""}b_x[P.xoff + u32(rows[q]) * P.dim + col];
  }
  b_out[o] = acc;
}`,
  }));
  return { kernel, bufs: hasW ? [x, rowOfPair, weights, out] : [x, rowOfPair, out], params: [xoff, xrows, rpoff, woff, ooff, tokens, topK, dim], workgroups: groups(tokens * dim) };
}

/** Launch of gatherAlongRows: one invocation per output element (r, s). */
export function gatherAlongRowsLaunch(x: Buf, xoff: number, idx: Buf, ioff: number, out: Buf, ooff: number, rows: number, cols: number, k: number): Launch | null {
  if (rows * k === 0) return null;
  const kernel: Kernel = memoKernel("gather_along_rows", () => ({
    label: "gather_along_rows",
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_idx", type: "i32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("xoff", "ioff", "ooff", "rows", "cols", "k"),
    code: `${entry(EW_WG)} {
  let t = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (t >= P.rows * P.k) { return; }
  let r = t / P.k;
  let c = b_idx[P.ioff + t];
  var v: f32 = 0.0;
  if (c >= 0 && u32(c) < P.cols) { v = b_x[P.xoff + r * P.cols + u32(c)]; }
  b_out[P.ooff + t] = v;
}`,
  }));
  return { kernel, bufs: [x, idx, out], params: [xoff, ioff, ooff, rows, cols, k], workgroups: groups(rows * k) };
}

/** Launch of scatterAddAlongRows: one invocation per row, its k entries in order (deterministic). */
export function scatterAddAlongRowsLaunch(dout: Buf, goff: number, idx: Buf, ioff: number, dx: Buf, xoff: number, rows: number, cols: number, k: number): Launch | null {
  if (rows * k === 0) return null;
  const kernel: Kernel = memoKernel("scatter_add_along_rows", () => ({
    label: "scatter_add_along_rows",
    buffers: [
      { name: "b_g", type: "f32", write: false },
      { name: "b_idx", type: "i32", write: false },
      { name: "b_dx", type: "f32", write: true },
    ],
    params: u32s("goff", "ioff", "xoff", "rows", "cols", "k"),
    code: `${entry(EW_WG)} {
  let r = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (r >= P.rows) { return; }
  for (var s = 0u; s < P.k; s = s + 1u) {
    let c = b_idx[P.ioff + r * P.k + s];
    if (c < 0 || u32(c) >= P.cols) { continue; }
    let o = P.xoff + r * P.cols + u32(c);
    b_dx[o] = b_dx[o] + b_g[P.goff + r * P.k + s];
  }
}`,
  }));
  return { kernel, bufs: [dout, idx, dx], params: [goff, ioff, xoff, rows, cols, k], workgroups: groups(rows) };
}
