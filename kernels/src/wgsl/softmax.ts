/**
 * Row-wise softmax / log-softmax forward and backward (f32), one workgroup per row.
 *
 * Forward subtracts the row max before exponentiating (domain.md §5):
 *   softmax y = exp(x − m) / Σ exp(x − m);  log-softmax y = x − m − log Σ exp(x − m).
 * Backward given the forward output y:
 *   softmax dx = y ⊙ (dy − Σ dy·y);  log-softmax dx = dy − exp(y) · Σ dy.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, ROW_WG, u32s, memoKernel } from "./launch.ts";
import { NEG_BIG, treeReduce } from "./workgroup_reduce.ts";

/** Launch of (log-)softmax over `rows` rows of `cols`. */
export function softmaxLaunch(x: Buf, xoff: number, y: Buf, yoff: number, rows: number, cols: number, log: boolean): Launch {
  const kernel: Kernel = memoKernel(log ? "log_softmax" : "softmax", () => ({
    label: log ? "log_softmax" : "softmax",
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_y", type: "f32", write: true },
    ],
    params: u32s("xoff", "yoff", "rows", "cols"),
    code: `${treeReduce()}${entry(ROW_WG)} {
  let r = wg_lin(wg, nwg);
  if (r >= P.rows) { return; }
  let xb = P.xoff + r * P.cols;
  let yb = P.yoff + r * P.cols;
  var m: f32 = ${NEG_BIG};
  for (var c = li; c < P.cols; c = c + ${ROW_WG}u) { m = max(m, b_x[xb + c]); }
  m = wg_max(li, m);
  var s: f32 = 0.0;
  for (var c = li; c < P.cols; c = c + ${ROW_WG}u) { s = s + exp(b_x[xb + c] - m); }
  s = wg_sum(li, s);
  ${log ? "let ls = log(s);" : "let inv = 1.0 / s;"}
  for (var c = li; c < P.cols; c = c + ${ROW_WG}u) {
    ${log ? "b_y[yb + c] = b_x[xb + c] - m - ls;" : "b_y[yb + c] = exp(b_x[xb + c] - m) * inv;"}
  }
}`,
  }));
  return { kernel, bufs: [x, y], params: [xoff, yoff, rows, cols], workgroups: rows };
}

/** Launch of the backward of (log-)softmax given forward output y. */
export function softmaxBackwardLaunch(y: Buf, yoff: number, dy: Buf, dyoff: number, dx: Buf, dxoff: number, rows: number, cols: number, log: boolean): Launch {
  const kernel: Kernel = memoKernel(log ? "log_softmax_bwd" : "softmax_bwd", () => ({
    label: log ? "log_softmax_bwd" : "softmax_bwd",
    buffers: [
      { name: "b_y", type: "f32", write: false },
      { name: "b_dy", type: "f32", write: false },
      { name: "b_dx", type: "f32", write: true },
    ],
    params: u32s("yoff", "dyoff", "dxoff", "rows", "cols"),
    code: `${treeReduce()}${entry(ROW_WG)} {
  let r = wg_lin(wg, nwg);
  if (r >= P.rows) { return; }
  let yb = P.yoff + r * P.cols;
  let db = P.dyoff + r * P.cols;
  let xb = P.dxoff + r * P.cols;
  var s: f32 = 0.0;
  for (var c = li; c < P.cols; c = c + ${ROW_WG}u) { s = s + ${log ? "b_dy[db + c]" : "b_dy[db + c] * b_y[yb + c]"}; }
  s = wg_sum(li, s);
  for (var c = li; c < P.cols; c = c + ${ROW_WG}u) {
    ${log ? "b_dx[xb + c] = b_dy[db + c] - exp(b_y[yb + c]) * s;" : "b_dx[xb + c] = b_y[yb + c] * (b_dy[db + c] - s);"}
  }
}`,
  }));
  return { kernel, bufs: [y, dy, dx], params: [yoff, dyoff, dxoff, rows, cols], workgroups: rows };
}
