/**
 * Reductions: `sum` and `mean` over all elements or one axis (accumulated in f32 by the backend).
 * Backward broadcasts the incoming gradient back over the reduced axis.
 */
import type { Backend, View } from "@zeromoe/kernels";
import { accumulateGrad, record, scratch } from "../tape.ts";
import { Tensor, empty, fmtShape, numelOf } from "../tensor.ts";

function resolveAxis(x: Tensor, axis: number): number {
  const a = axis < 0 ? axis + x.ndim : axis;
  if (!Number.isInteger(a) || a < 0 || a >= x.ndim) throw new Error(`axis ${axis} out of range for ${x}`);
  return a;
}

/** dst[outer, n, inner] = alpha · g[outer, 1, inner] (a broadcasting multiply by an [n] vector of alpha). */
function broadcastBack(be: Backend, g: View, dst: View, outer: number, n: number, inner: number, alpha: number): void {
  const a = scratch(be, n);
  be.fill(a.view, alpha, n);
  be.binary("mul", g, [outer, 1, inner], a.view, [1, n, 1], dst);
  a.free();
}

function reduceOp(kind: "sum" | "mean", x: Tensor, axis: number | undefined, keepdim: boolean): Tensor {
  if (x.dtype !== "f32") throw new Error(`${kind}: f32 expected, got ${x}`);
  let outer: number, n: number, inner: number, shape: number[];
  if (axis === undefined) {
    outer = 1;
    n = x.numel;
    inner = 1;
    shape = keepdim ? x.shape.map(() => 1) : [1];
  } else {
    const a = resolveAxis(x, axis);
    outer = numelOf(x.shape.slice(0, a));
    n = x.shape[a]!;
    inner = numelOf(x.shape.slice(a + 1));
    shape = keepdim ? x.shape.map((d, i) => (i === a ? 1 : d)) : x.shape.filter((_, i) => i !== a);
  }
  if (n === 0) throw new Error(`${kind}: reducing an empty axis of ${x} (shape ${fmtShape(x.shape)})`);
  const be = x.be;
  const out = empty(be, shape);
  if (out.numel > 0) be.reduce(kind, x.view, out.view, outer, n, inner);
  const alpha = kind === "mean" ? 1 / n : 1;
  return record(kind, [x], out, (g) => {
    accumulateGrad(
      x,
      (dst, acc) => {
        if (!acc) {
          broadcastBack(be, g.view, dst, outer, n, inner, alpha);
          return;
        }
        const tmp = scratch(be, x.numel);
        broadcastBack(be, g.view, tmp.view, outer, n, inner, alpha);
        be.axpy(1, tmp.view, dst, x.numel);
        tmp.free();
      },
      true,
    );
  });
}

/** Sum over all elements (→ [1], or all-ones shape with `keepdim`) or over `axis` (negative counts
 * from the end). @throws on an out-of-range axis or an empty reduction. */
export function sum(x: Tensor, axis?: number, keepdim = false): Tensor {
  return reduceOp("sum", x, axis, keepdim);
}

/** Mean over all elements or over `axis`; see {@link sum}. */
export function mean(x: Tensor, axis?: number, keepdim = false): Tensor {
  return reduceOp("mean", x, axis, keepdim);
}
