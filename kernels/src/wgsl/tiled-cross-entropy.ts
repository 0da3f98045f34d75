/**
 * Tiled softmax cross-entropy: the three per-tile kernels of a cross-entropy whose logits arrive
 * one [rows × cols] vocabulary tile at a time (the fused LM head + loss,
 * core/src/tensor/ops/linear-cross-entropy.ts; the contract is in ../backend.ts
 * `crossEntropyTileStats/Finish/Backward`).
 *
 * - stats: one workgroup per row; each invocation keeps an online (max, Σexp) pair over its
 *   columns, the workgroup combines them in a fixed tree (wg_maxsum) and invocation 0 merges the
 *   result into the row's running state (m, s, x_t) — Milakov & Gimelshein 2018.
 * - finish: one invocation per row: lse = m + log s, loss = lse − x_t + zLoss·lse².
 * - backward: one workgroup per row, in place: x ← g·scale·(exp(x − lse)·(1 + 2·zLoss·lse) − onehot).
 * All arithmetic f32; results are deterministic run to run.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { EW_WG, entry, f32s, groups, memoKernel, u32s } from "./launch.ts";
import { NEG_BIG, rowWorkgroup, treeReduceMaxSum } from "./workgroup-reduce.ts";

/** Launch of {@link Backend.crossEntropyTileStats}. */
export function ceTileStatsLaunch(logits: Buf, loff: number, targets: Buf, toff: number, stats: Buf, soff: number, rows: number, cols: number, col0: number, ignoreIndex: number, first: boolean): Launch {
  const W = rowWorkgroup(cols);
  const kernel: Kernel = memoKernel(`ce_tile_stats_w${W}`, () => ({
    label: `ce_tile_stats_w${W}`,
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_t", type: "i32", write: false },
      { name: "b_s", type: "f32", write: true },
    ],
    params: [...u32s("loff", "toff", "soff", "rows", "cols", "col0", "first"), { name: "ignore", type: "i32" }],
    code: `${treeReduceMaxSum(W)}${entry(W)} {
  let r = wg_lin(wg, nwg);
  if (r >= P.rows) { return; }
  let t = b_t[P.toff + r];
  if (t == P.ignore) { return; }
  let xb = P.loff + r * P.cols;
  var ms = vec2<f32>(${NEG_BIG}, 0.0);
  for (var c = li; c < P.cols; c = c + ${W}u) { ms = online_add(ms, b_x[xb + c]); }
  ms = wg_maxsum(li, ms.x, ms.y);
  if (li == 0u) {
    let q = P.soff + 3u * r;
    var m = ms.x;
    var s = ms.y;
    if (P.first == 0u) {
      let m0 = b_s[q];
      let M = max(m0, m);
      s = b_s[q + 1u] * exp(m0 - M) + s * exp(m - M);
      m = M;
    }
    b_s[q] = m;
    b_s[q + 1u] = s;
    if (t >= 0 && u32(t) >= P.col0 && u32(t) < P.col0 + P.cols) { b_s[q + 2u] = b_x[xb + u32(t) - P.col0]; }
    else if (P.first != 0u) { b_s[q + 2u] = 0.0; }
  }
}`,
  }));
  return { kernel, bufs: [logits, targets, stats], params: [loff, toff, soff, rows, cols, col0, first ? 1 : 0, ignoreIndex], workgroups: rows };
}

/** Launch of {@link Backend.crossEntropyTileFinish}. */
export function ceTileFinishLaunch(stats: Buf, soff: number, targets: Buf, toff: number, lse: Buf, eoff: number, losses: Buf, lsoff: number, rows: number, vocab: number, ignoreIndex: number, zLoss: number): Launch {
  const kernel: Kernel = memoKernel("ce_tile_finish", () => ({
    label: "ce_tile_finish",
    buffers: [
      { name: "b_s", type: "f32", write: false },
      { name: "b_t", type: "i32", write: false },
      { name: "b_lse", type: "f32", write: true },
      { name: "b_loss", type: "f32", write: true },
    ],
    params: [...u32s("soff", "toff", "eoff", "lsoff", "rows", "vocab"), { name: "ignore", type: "i32" }, ...f32s("z")],
    code: `${entry(EW_WG)} {
  let r = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (r >= P.rows) { return; }
  let t = b_t[P.toff + r];
  if (t == P.ignore) {
    b_lse[P.eoff + r] = 0.0;
    b_loss[P.lsoff + r] = 0.0;
    return;
  }
  let q = P.soff + 3u * r;
  let l = b_s[q] + log(b_s[q + 1u]);
  b_lse[P.eoff + r] = l;
  if (t < 0 || u32(t) >= P.vocab) { b_loss[P.lsoff + r] = bitcast<f32>(0x7fc00000u); }
  else { b_loss[P.lsoff + r] = l - b_s[q + 2u] + P.z * l * l; }
}`,
  }));
  return { kernel, bufs: [stats, targets, lse, losses], params: [soff, toff, eoff, lsoff, rows, vocab, ignoreIndex, zLoss], workgroups: groups(rows) };
}

/** Launch of {@link Backend.crossEntropyTileBackward} (in place on `logits`). */
export function ceTileBackwardLaunch(logits: Buf, loff: number, targets: Buf, toff: number, lse: Buf, eoff: number, gradOut: Buf, goff: number, rows: number, cols: number, col0: number, ignoreIndex: number, gradScale: number, zLoss: number): Launch {
  const W = rowWorkgroup(cols);
  const kernel: Kernel = memoKernel(`ce_tile_backward_w${W}`, () => ({
    label: `ce_tile_backward_w${W}`,
    buffers: [
      { name: "b_x", type: "f32", write: true },
      { name: "b_t", type: "i32", write: false },
      { name: "b_lse", type: "f32", write: false },
      { name: "b_g", type: "f32", write: false },
    ],
    params: [...u32s("loff", "toff", "eoff", "goff", "rows", "cols", "col0"), { name: "ignore", type: "i32" }, ...f32s("scale", "z")],
    code: `${entry(W)} {
  let r = wg_lin(wg, nwg);
  if (r >= P.rows) { return; }
  let xb = P.loff + r * P.cols;
  let t = b_t[P.toff + r];
  if (t == P.ignore) {
    for (var c = li; c < P.cols; c = c + ${W}u) { b_x[xb + c] = 0.0; }
    return;
  }
  let l = b_lse[P.eoff + r];
  let a = b_g[P.goff] * P.scale;
  let zf = 1.0 + 2.0 * P.z * l;
  for (var c = li; c < P.cols; c = c + ${W}u) {
    let p = exp(b_x[xb + c] - l) * zf;
    b_x[xb + c] = (p - select(0.0, 1.0, t >= 0 && u32(t) == P.col0 + c)) * a;
  }
}`,
  }));
  return { kernel, bufs: [logits, targets, lse, gradOut], params: [loff, toff, eoff, goff, rows, cols, col0, ignoreIndex, gradScale, zLoss], workgroups: rows };
}
