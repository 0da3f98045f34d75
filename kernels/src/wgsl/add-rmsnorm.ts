/**
 * Residual add + RMSNorm fused (f32), for the pre-norm decoder's `h2 = h + a; n = rmsnorm(h2)·w`
 * (Zhang & Sennrich 2019 for RMSNorm; the fusion as in Apex/vLLM `fused_add_rms_norm`):
 * - forward, one workgroup per row: s = x + r is written and its sum of squares reduced in the same
 *   pass, then y = s·rstd·w (s recomputed from x + r, the same f32 value) — one dispatch instead of
 *   `binary_add` + `rmsnorm`, and s is not read back;
 * - backward: the rmsnorm dx kernel also adds the sum's own gradient (dx = dSum + rmsnorm'(dy),
 *   in place on dSum allowed), instead of rmsnorm dx into a temporary plus an `axpy`; dw uses
 *   norm.ts's deterministic two-stage column sums.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, f32s, memoKernel, u32s } from "./launch.ts";
import { rmsnormBackwardLaunches } from "./norm.ts";
import { rowWorkgroup, treeReduce } from "./workgroup-reduce.ts";

const F = "f32" as const;

/** Launch of s = x + r, y = rmsnorm(s)·w, rstd per row. */
export function addRmsnormLaunch(x: Buf, xoff: number, r: Buf, roff: number, w: Buf, woff: number, s: Buf, soff: number, y: Buf, yoff: number, rstd: Buf, rsoff: number, rows: number, cols: number, eps: number): Launch {
  const W = rowWorkgroup(cols);
  const kernel: Kernel = memoKernel(`add_rmsnorm_w${W}`, () => ({
    label: `add_rmsnorm_w${W}`,
    buffers: [
      { name: "b_x", type: F, write: false },
      { name: "b_r", type: F, write: false },
      { name: "b_w", type: F, write: false },
      { name: "b_s", type: F, write: true },
      { name: "b_y", type: F, write: true },
      { name: "b_rs", type: F, write: true },
    ],
    params: [...u32s("xoff", "roff", "woff", "soff", "yoff", "rsoff", "rows", "cols"), ...f32s("eps")],
    code: `${treeReduce(W)}${entry(W)} {
  let row = wg_lin(wg, nwg);
  if (row >= P.rows) { return; }
  let xb = P.xoff + row * P.cols;
  let rb = P.roff + row * P.cols;
  let sb = P.soff + row * P.cols;
  let yb = P.yoff + row * P.cols;
  var ss: f32 = 0.0;
  for (var c = li; c < P.cols; c = c + ${W}u) { let v = b_x[xb + c] + b_r[rb + c]; b_s[sb + c] = v; ss = ss + v * v; }
  ss = wg_sum(li, ss);
  let rs = 1.0 / sqrt(ss / f32(P.cols) + P.eps);
  for (var c = li; c < P.cols; c = c + ${W}u) { b_y[yb + c] = (b_x[xb + c] + b_r[rb + c]) * rs * b_w[P.woff + c]; }
  if (li == 0u) { b_rs[P.rsoff + row] = rs; }
}`,
  }));
  return { kernel, bufs: [x, r, w, s, y, rstd], params: [xoff, roff, woff, soff, yoff, rsoff, rows, cols, eps], workgroups: rows };
}

/** Launches of the backward with the sum's gradient added: dx = dSum + rmsnorm'(dy) (per row; dx
 * may be dSum), then dw += (per column, norm.ts). Without dSum, norm.ts's rmsnorm backward. */
export function addRmsnormBackwardLaunches(s: Buf, soff: number, w: Buf, woff: number, rstd: Buf, rsoff: number, dy: Buf, dyoff: number, dSum: Buf | null, dsoff: number, dx: Buf, dxoff: number, dw: Buf, dwoff: number, rows: number, cols: number, scratch: Buf): Launch[] {
  const plain = rmsnormBackwardLaunches(s, soff, w, woff, rstd, rsoff, dy, dyoff, dx, dxoff, dw, dwoff, rows, cols, scratch);
  if (!dSum) return plain;
  const W = rowWorkgroup(cols);
  const dxK: Kernel = memoKernel(`add_rmsnorm_bwd_dx_w${W}`, () => ({
    label: `add_rmsnorm_bwd_dx_w${W}`,
    buffers: [
      { name: "b_s", type: F, write: false },
      { name: "b_w", type: F, write: false },
      { name: "b_rs", type: F, write: false },
      { name: "b_dy", type: F, write: false },
      { name: "b_ds", type: F, write: false },
      { name: "b_dx", type: F, write: true },
    ],
    params: u32s("soff", "woff", "rsoff", "dyoff", "dsoff", "dxoff", "rows", "cols"),
    code: `${treeReduce(W)}${entry(W)} {
  let row = wg_lin(wg, nwg);
  if (row >= P.rows) { return; }
  let sb = P.soff + row * P.cols;
  let gb = P.dyoff + row * P.cols;
  let db = P.dsoff + row * P.cols;
  let ob = P.dxoff + row * P.cols;
  let rs = b_rs[P.rsoff + row];
  var t: f32 = 0.0;
  for (var c = li; c < P.cols; c = c + ${W}u) { t = t + b_dy[gb + c] * b_w[P.woff + c] * b_s[sb + c]; }
  t = wg_sum(li, t);
  let k = rs * rs * rs * t / f32(P.cols);
  for (var c = li; c < P.cols; c = c + ${W}u) { b_dx[ob + c] = b_ds[db + c] + (rs * b_dy[gb + c] * b_w[P.woff + c] - k * b_s[sb + c]); }
}`,
  }));
  return [{ kernel: dxK, bufs: [s, w, rstd, dy, dSum, dx], params: [soff, woff, rsoff, dyoff, dsoff, dxoff, rows, cols], workgroups: rows }, ...plain.slice(1)];
}
