/**
 * RMSNorm (Zhang & Sennrich 2019) and LayerNorm (Ba et al. 2016) forward and backward (f32).
 *
 * Forward and dx: one workgroup per row with tree reductions (workgroup-reduce.ts). Weight/bias
 * gradients, deterministic in two stages: invocation (chunk k, column c) sums rows
 * [32k, 32k + 32) in order into a scratch of partials; then one invocation per column adds the
 * partials in ascending k to the existing dw/db (they accumulate, backend.ts).
 *   rms:  r = 1/sqrt(mean(x²) + eps); y = x·r·w;  dx = r·g − r³·x·Σ(g·x)/cols, g = dy·w;  dw += Σ_rows dy·x·r
 *   ln:   xh = (x − μ)·r, r = 1/sqrt(var + eps) (two-pass variance); y = xh·w + b;
 *         dx = r·(g − mean(g) − xh·mean(g·xh));  dw += Σ dy·xh;  db += Σ dy
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, f32s, groups, u32s, memoKernel } from "./launch.ts";
import { rowWorkgroup, treeReduce } from "./workgroup-reduce.ts";

const F = "f32" as const;

/** Rows summed by one invocation in the first stage of the dw/db column sums. */
export const ROW_CHUNK = 32;

/** Row chunks of the dw/db column sums; the scratch needs normChunks(rows)·cols f32 per output
 * (two outputs for layernorm). */
export function normChunks(rows: number): number {
  return Math.max(1, Math.ceil(rows / ROW_CHUNK));
}

/** out[ooff + c] += Σ_{k < nch} part[poff + k·cols + c] in ascending k (one invocation per column). */
function colSumAdd(part: Buf, poff: number, out: Buf, ooff: number, cols: number, nch: number): Launch {
  const kernel = memoKernel("norm_colsum_add", () => ({
    label: "norm_colsum_add",
    buffers: [
      { name: "b_part", type: F, write: false },
      { name: "b_out", type: F, write: true },
    ],
    params: u32s("poff", "ooff", "cols", "nch"),
    code: `${entry(EW_WG)} {
  let c = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (c >= P.cols) { return; }
  var acc: f32 = 0.0;
  for (var k = 0u; k < P.nch; k = k + 1u) { acc = acc + b_part[P.poff + k * P.cols + c]; }
  b_out[P.ooff + c] = b_out[P.ooff + c] + acc;
}`,
  }));
  return { kernel, bufs: [part, out], params: [poff, ooff, cols, nch], workgroups: groups(cols) };
}

/** Launch of RMSNorm forward. */
export function rmsnormLaunch(x: Buf, xoff: number, w: Buf, woff: number, y: Buf, yoff: number, rstd: Buf, roff: number, rows: number, cols: number, eps: number): Launch {
  const W = rowWorkgroup(cols);
  const kernel: Kernel = memoKernel(`rmsnorm_w${W}`, () => ({
    label: `rmsnorm_w${W}`,
    buffers: [
      { name: "b_x", type: F, write: false },
      { name: "b_w", type: F, write: false },
      { name: "b_y", type: F, write: true },
      { name: "b_r", type: F, write: true },
    ],
    params: [...u32s("xoff", "woff", "yoff", "roff", "rows", "cols"), ...f32s("eps")],
    code: `${treeReduce(W)}${entry(W)} {
  let r = wg_lin(wg, nwg);
  if (r >= P.rows) { return; }
  let xb = P.xoff + r * P.cols;
  let yb = P.yoff + r * P.cols;
  var s: f32 = 0.0;
  for (var c = li; c < P.cols; c = c + ${W}u) { let v = b_x[xb + c]; s = s + v * v; }
  s = wg_sum(li, s);
  let rs = 1.0 / sqrt(s / f32(P.cols) + P.eps);
  for (var c = li; c < P.cols; c = c + ${W}u) { b_y[yb + c] = b_x[xb + c] * rs * b_w[P.woff + c]; }
  if (li == 0u) { b_r[P.roff + r] = rs; }
}`,
  }));
  return { kernel, bufs: [x, w, y, rstd], params: [xoff, woff, yoff, roff, rows, cols, eps], workgroups: rows };
}

/** Launches of RMSNorm backward: dx (per row) then dw += (per column). */
export function rmsnormBackwardLaunches(x: Buf, xoff: number, w: Buf, woff: number, rstd: Buf, roff: number, dy: Buf, dyoff: number, dx: Buf, dxoff: number, dw: Buf, dwoff: number, rows: number, cols: number, scratch: Buf): Launch[] {
  const W = rowWorkgroup(cols);
  const dxK: Kernel = memoKernel(`rmsnorm_bwd_dx_w${W}`, () => ({
    label: `rmsnorm_bwd_dx_w${W}`,
    buffers: [
      { name: "b_x", type: F, write: false },
      { name: "b_w", type: F, write: false },
      { name: "b_r", type: F, write: false },
      { name: "b_dy", type: F, write: false },
      { name: "b_dx", type: F, write: true },
    ],
    params: u32s("xoff", "woff", "roff", "dyoff", "dxoff", "rows", "cols"),
    code: `${treeReduce(W)}${entry(W)} {
  let r = wg_lin(wg, nwg);
  if (r >= P.rows) { return; }
  let xb = P.xoff + r * P.cols;
  let db = P.dyoff + r * P.cols;
  let ob = P.dxoff + r * P.cols;
  let rs = b_r[P.roff + r];
  var s: f32 = 0.0;
  for (var c = li; c < P.cols; c = c + ${W}u) { s = s + b_dy[db + c] * b_w[P.woff + c] * b_x[xb + c]; }
  s = wg_sum(li, s);
  let k = rs * rs * rs * s / f32(P.cols);
  for (var c = li; c < P.cols; c = c + ${W}u) { b_dx[ob + c] = rs * b_dy[db + c] * b_w[P.woff + c] - k * b_x[xb + c]; }
}`,
  }));
  const part: Kernel = memoKernel("rmsnorm_bwd_dw_part", () => ({
    label: "rmsnorm_bwd_dw_part",
    buffers: [
      { name: "b_x", type: F, write: false },
      { name: "b_r", type: F, write: false },
      { name: "b_dy", type: F, write: false },
      { name: "b_part", type: F, write: true },
    ],
    params: u32s("xoff", "roff", "dyoff", "rows", "cols", "nch"),
    code: `${entry(EW_WG)} {
  let t = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (t >= P.nch * P.cols) { return; }
  let ch = t / P.cols;
  let c = t % P.cols;
  var acc: f32 = 0.0;
  let r1 = min(P.rows, (ch + 1u) * ${ROW_CHUNK}u);
  for (var r = ch * ${ROW_CHUNK}u; r < r1; r = r + 1u) { acc = acc + b_dy[P.dyoff + r * P.cols + c] * b_x[P.xoff + r * P.cols + c] * b_r[P.roff + r]; }
  b_part[t] = acc;
}`,
  }));
  const nch = normChunks(rows);
  return [
    { kernel: dxK, bufs: [x, w, rstd, dy, dx], params: [xoff, woff, roff, dyoff, dxoff, rows, cols], workgroups: rows },
    { kernel: part, bufs: [x, rstd, dy, scratch], params: [xoff, roff, dyoff, rows, cols, nch], workgroups: groups(nch * cols) },
    colSumAdd(scratch, 0, dw, dwoff, cols, nch),
  ];
}

/** Launch of LayerNorm forward (saves mean and rstd per row). */
export function layernormLaunch(x: Buf, xoff: number, w: Buf, woff: number, b: Buf, boff: number, y: Buf, yoff: number, mean: Buf, moff: number, rstd: Buf, roff: number, rows: number, cols: number, eps: number): Launch {
  const W = rowWorkgroup(cols);
  const kernel: Kernel = memoKernel(`layernorm_w${W}`, () => ({
    label: `layernorm_w${W}`,
    buffers: [
      { name: "b_x", type: F, write: false },
      { name: "b_w", type: F, write: false },
      { name: "b_b", type: F, write: false },
      { name: "b_y", type: F, write: true },
      { name: "b_mean", type: F, write: true },
      { name: "b_r", type: F, write: true },
    ],
    params: [...u32s("xoff", "woff", "boff", "yoff", "moff", "roff", "rows", "cols"), ...f32s("eps")],
    code: `${treeReduce(W)}${entry(W)} {
  let r = wg_lin(wg, nwg);
  if (r >= P.rows) { return; }
  let xb = P.xoff + r * P.cols;
  let yb = P.yoff + r * P.cols;
  var s: f32 = 0.0;
  for (var c = li; c < P.cols; c = c + ${W}u) { s = s + b_x[xb + c]; }
  let mu = wg_sum(li, s) / f32(P.cols);
  var q: f32 = 0.0;
  for (var c = li; c < P.cols; c = c + ${W}u) { let d = b_x[xb + c] - mu; q = q + d * d; }
  let rs = 1.0 / sqrt(wg_sum(li, q) / f32(P.cols) + P.eps);
  for (var c = li; c < P.cols; c = c + ${W}u) { b_y[yb + c] = (b_x[xb + c] - mu) * rs * b_w[P.woff + c] + b_b[P.boff + c]; }
  if (li == 0u) { b_mean[P.moff + r] = mu; b_r[P.roff + r] = rs; }
}`,
  }));
  return { kernel, bufs: [x, w, b, y, mean, rstd], params: [xoff, woff, boff, yoff, moff, roff, rows, cols, eps], workgroups: rows };
}

/** Launches of LayerNorm backward: dx (per row), then dw += and db += (per column). */
export function layernormBackwardLaunches(x: Buf, xoff: number, w: Buf, woff: number, mean: Buf, moff: number, rstd: Buf, roff: number, dy: Buf, dyoff: number, dx: Buf, dxoff: number, dw: Buf, dwoff: number, db: Buf, dboff: number, rows: number, cols: number, scratch: Buf): Launch[] {
  const W = rowWorkgroup(cols);
  const dxK: Kernel = memoKernel(`layernorm_bwd_dx_w${W}`, () => ({
    label: `layernorm_bwd_dx_w${W}`,
    buffers: [
      { name: "b_x", type: F, write: false },
      { name: "b_w", type: F, write: false },
      { name: "b_mean", type: F, write: false },
      { name: "b_r", type: F, write: false },
      { name: "b_dy", type: F, write: false },
      { name: "b_dx", type: F, write: true },
    ],
    params: u32s("xoff", "woff", "moff", "roff", "dyoff", "dxoff", "rows", "cols"),
    code: `${treeReduce(W)}${entry(W)} {
  let r = wg_lin(wg, nwg);
  if (r >= P.rows) { return; }
  let xb = P.xoff + r * P.cols;
  let db = P.dyoff + r * P.cols;
  let ob = P.dxoff + r * P.cols;
  let mu = b_mean[P.moff + r];
  let rs = b_r[P.roff + r];
  var s1: f32 = 0.0;
  var s2: f32 = 0.0;
  for (var c = li; c < P.cols; c = c + ${W}u) {
    let g = b_dy[db + c] * b_w[P.woff + c];
    s1 = s1 + g;
    s2 = s2 + g * (b_x[xb + c] - mu) * rs;
  }
  let mg = wg_sum(li, s1) / f32(P.cols);
  let mgx = wg_sum(li, s2) / f32(P.cols);
  for (var c = li; c < P.cols; c = c + ${W}u) {
    let g = b_dy[db + c] * b_w[P.woff + c];
    let xh = (b_x[xb + c] - mu) * rs;
    b_dx[ob + c] = rs * (g - mg - xh * mgx);
  }
}`,
  }));
  const part: Kernel = memoKernel("layernorm_bwd_dwdb_part", () => ({
    label: "layernorm_bwd_dwdb_part",
    buffers: [
      { name: "b_x", type: F, write: false },
      { name: "b_mean", type: F, write: false },
      { name: "b_r", type: F, write: false },
      { name: "b_dy", type: F, write: false },
      { name: "b_part", type: F, write: true },
    ],
    params: u32s("xoff", "moff", "roff", "dyoff", "rows", "cols", "nch"),
    code: `${entry(EW_WG)} {
  let t = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (t >= P.nch * P.cols) { return; }
  let ch = t / P.cols;
  let c = t % P.cols;
  var aw: f32 = 0.0;
  var ab: f32 = 0.0;
  let r1 = min(P.rows, (ch + 1u) * ${ROW_CHUNK}u);
  for (var r = ch * ${ROW_CHUNK}u; r < r1; r = r + 1u) {
    let g = b_dy[P.dyoff + r * P.cols + c];
    aw = aw + g * (b_x[P.xoff + r * P.cols + c] - b_mean[P.moff + r]) * b_r[P.roff + r];
    ab = ab + g;
  }
  b_part[t] = aw;
  b_part[P.nch * P.cols + t] = ab;
}`,
  }));
  const nch = normChunks(rows);
  return [
    { kernel: dxK, bufs: [x, w, mean, rstd, dy, dx], params: [xoff, woff, moff, roff, dyoff, dxoff, rows, cols], workgroups: rows },
    { kernel: part, bufs: [x, mean, rstd, dy, scratch], params: [xoff, moff, roff, dyoff, rows, cols, nch], workgroups: groups(nch * cols) },
    colSumAdd(scratch, 0, dw, dwoff, cols, nch),
    colSumAdd(scratch, nch * cols, db, dboff, cols, nch),
  ];
}
