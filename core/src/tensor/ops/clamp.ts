/**
 * Elementwise clamp (router logit clamping, the MoE router option `router_logits_clamp`): y = min(max(x, lo), hi)
 * on the device. The gradient passes where lo < x < hi (strictly) and is zero elsewhere — computed
 * as relu'(x − lo)·relu'(hi − x)·g with the backend's `unaryBackward("relu")` (relu'(0) = 0).
 */
import { accumulateGrad, record, scratch } from "../tape.ts";
import { Tensor, empty, full } from "../tensor.ts";

/** Clamp x (f32, any shape) to [lo, hi]. @throws on a non-f32 x or lo > hi (or NaN bounds). */
export function clamp(x: Tensor, lo: number, hi: number): Tensor {
  if (x.dtype !== "f32") throw new Error(`clamp: expected an f32 tensor, got ${x}`);
  if (!(lo <= hi)) throw new Error(`clamp: lo (${lo}) must be ≤ hi (${hi})`);
  const be = x.be;
  const n = x.numel;
  const out = empty(be, x.shape);
  if (n > 0) {
    const loT = full(be, [1], lo);
    const hiT = full(be, [1], hi);
    const tmp = scratch(be, n);
    be.binary("max", x.view, [n], loT.view, [1], tmp.view);
    be.binary("min", tmp.view, [n], hiT.view, [1], out.view);
    tmp.free();
    loT.dispose();
    hiT.dispose();
  }
  return record("clamp", [x], out, (g) => {
    if (n === 0) return;
    const t = scratch(be, n);
    const d = scratch(be, n);
    be.affine(x.view, t.view, n, 1, -lo); // x − lo
    be.unaryBackward("relu", t.view, g.view, d.view, n); // g·[x > lo]
    be.affine(x.view, t.view, n, -1, hi); // hi − x
    accumulateGrad(
      x,
      (dst, acc) => {
        if (!acc) be.unaryBackward("relu", t.view, d.view, dst, n); // ·[x < hi]
        else {
          const e = scratch(be, n);
          be.unaryBackward("relu", t.view, d.view, e.view, n);
          be.axpy(1, e.view, dst, n);
          e.free();
        }
      },
      true,
    );
    t.free();
    d.free();
  });
}
