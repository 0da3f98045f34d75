/**
 * Row-wise softmax / log-softmax forward and backward (f32), one workgroup per row.
 *
 * Forward subtracts the row max before exponentiating (docs/domain.md §5):
 *   softmax y = exp(x − m) / Σ exp(x − m);  log-softmax y = x − m − log Σ exp(x − m).
 * Backward given the forward output y:
 *   softmax dx = y ⊙ (dy − Σ dy·y);  log-softmax dx = dy − exp(y) · Σ dy.
 */
import type { Buf } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, u32s, memoKernel } from "./launch.ts";
import { NEG_BIG, rowWorkgroup, treeReduce, treeReduceMaxSum } from "./workgroup-reduce.ts";

/** Launch of (log-)softmax over `rows` rows of `cols` (one pass for max and sum with the online
 * normaliser, one pass writing). */
export function softmaxLaunch(x: Buf, xoff: number, y: Buf, yoff: number, rows: number, cols: number, log: boolean): Launch {
  const W = rowWorkgroup(cols);
  const label = `${log ? "log_softmax" : "softmax"}_w${W}`;
  const kernel: Kernel = memoKernel(label, () => ({
    label,
    buffers: [
      { name: "b_x", type: "f32", write: false },
      { name: "b_y", type: "f32", write: true },
    ],
    params: u32s("xoff", "yoff", "rows", "cols"),
    code: `${treeReduceMaxSum(W)}${entry(W)} {
  let r = wg_lin(wg, nwg);
  if (r >= P.rows) { return; }
  let xb = P.xoff + r * P.cols;
  let yb = P.yoff + r * P.cols;
  var ms = vec2<f32>(${NEG_BIG}, 0.0);
  for (var c = li; c < P.cols; c = c + ${W}u) { ms = online_add(ms, b_x[xb + c]); }
  ms = wg_maxsum(li, ms.x, ms.y);
  let m = ms.x;
  ${log ? "let ls = log(ms.y);" : "let inv = 1.0 / ms.y;"}
  for (var c = li; c < P.cols; c = c + ${W}u) {
    ${log ? "b_y[yb + c] = b_x[xb + c] - m - ls;" : "b_y[yb + c] = exp(b_x[xb + c] - m) * inv;"}
  }
}`,
  }));
  return { kernel, bufs: [x, y], params: [xoff, yoff, rows, cols], workgroups: rows };
}

/** Launch of the backward of (log-)softmax given forward output y. */
export function softmaxBackwardLaunch(y: Buf, yoff: number, dy: Buf, dyoff: number, dx: Buf, dxoff: number, rows: number, cols: number, log: boolean): Launch {
  const W = rowWorkgroup(cols);
  const kernel: Kernel = memoKernel(`${log ? "log_softmax_bwd" : "softmax_bwd"}_w${W}`, () => ({
    label: `${log ? "log_softmax_bwd" : "softmax_bwd"}_w${W}`,
    buffers: [
      { name: "b_y", type: "f32", write: false },
      { name: "b_dy", type: "f32", write: false },
      { name: "b_dx", type: "f32", write: true },
    ],
    params: u32s("yoff", "dyoff", "dxoff", "rows", "cols"),
    code: `${treeReduce(W)}${entry(W)} {
  let r = wg_lin(wg, nwg);
  if (r >= P.rows) { return; }
  let yb = P.yoff + r * P.cols;
  let db = P.dyoff + r * P.cols;
  let xb = P.dxoff + r * P.cols;
  var s: f32 = 0.0;
  for (var c = li; c < P.cols; c = c + ${W}u) { s = s + ${log ? "b_dy[db + c]" : "b_dy[db + c] * b_y[yb + c]"}; }
  s = wg_sum(li, s);
  for (var c = li; c < P.cols; c = c + ${W}u) {
    ${log ? "b_dx[xb + c] = b_dy[db + c] - exp(b_y[yb + c]) * s;" : "b_dx[xb + c] = b_y[yb + c] * (b_dy[db + c] - s);"}
  }
}`,
  }));
  return { kernel, bufs: [y, dy, dx], params: [yoff, dyoff, dxoff, rows, cols], workgroups: rows };
}
