/**
 * Row-wise softmax and log-softmax over the last axis (f32, max subtracted, docs/domain.md §5).
 * Backward uses the saved output y: dx = y ⊙ (dy − Σ dy⊙y) for softmax, dx = dy − softmax·Σdy for
 * log-softmax (backend `softmaxBackward`).
 */
import { accumulateGrad, record } from "../tape.ts";
import { Tensor, empty } from "../tensor.ts";

function softmaxOp(x: Tensor, log: boolean): Tensor {
  if (x.dtype !== "f32") throw new Error(`${log ? "logSoftmax" : "softmax"}: f32 expected, got ${x}`);
  if (x.ndim === 0 || x.cols === 0) throw new Error(`${log ? "logSoftmax" : "softmax"}: needs a non-empty last axis, got ${x}`);
  const be = x.be;
  const rows = x.rows;
  const cols = x.cols;
  const out = empty(be, x.shape);
  if (rows > 0) be.softmax(x.view, out.view, rows, cols, log);
  return record(log ? "logSoftmax" : "softmax", [x], out, (g) => {
    accumulateGrad(x, (dst) => be.softmaxBackward(out.view, g.view, dst, rows, cols, log), false);
  });
}

/** softmax(x) along the last axis; output has x's shape. */
export function softmax(x: Tensor): Tensor {
  return softmaxOp(x, false);
}

/** log(softmax(x)) along the last axis, computed stably. */
export function logSoftmax(x: Tensor): Tensor {
  return softmaxOp(x, true);
}
