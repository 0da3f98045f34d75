/**
 * Row routing ops used by Mixture-of-Experts dispatch and combine (Megatron-Core's "permute" /
 * "unpermute"; Hugging Face's `hidden_states[token_idx]` and `index_add_`):
 * - `gatherRows`: out[i] = x[idx[i]]; backward scatter-adds into x.
 * - `scatterAddRows`: out[idx[i]] += w[i]·x[i] into a fresh zero tensor; x and w get gradients.
 * - `topk`: values and indices of the k largest per row, no gradient (use `gatherRows` on the
 *   flattened input with the indices to get differentiable values).
 */
import { accumulateGrad, gradTarget, record, scratch } from "../tape.ts";
import { Tensor, empty } from "../tensor.ts";

function checkIdx(op: string, idx: Tensor): void {
  if (idx.dtype !== "i32") throw new Error(`${op}: indices must be i32, got ${idx}`);
}

/** x f32 [N, ...rest], idx i32 [n] (−1 gives a zero row) → [n, ...rest]. */
export function gatherRows(x: Tensor, idx: Tensor): Tensor {
  checkIdx("gatherRows", idx);
  if (x.ndim === 0 || x.dtype !== "f32") throw new Error(`gatherRows: x must be f32 with rank ≥ 1, got ${x}`);
  const dim = x.shape[0] === 0 ? 0 : x.numel / x.shape[0]!;
  const n = idx.numel;
  const be = x.be;
  const out = empty(be, [n, ...x.shape.slice(1)]);
  if (out.numel > 0) be.gatherRows(x.view, idx.view, out.view, n, dim);
  return record("gatherRows", [x], out, (g) => {
    if (out.numel === 0) return;
    const t = gradTarget(x, "add");
    if (!t) return;
    be.scatterAddRows(g.view, idx.view, null, t.view, n, dim);
    t.commit();
  });
}

/**
 * out [outRows, ...rest] = 0, then out[idx[i]] += w[i]·x[i] for i < n (i ascending; idx −1
 * skipped). x f32 [n, ...rest]; idx i32 [n]; weights f32 with n elements ([n] or [n, 1]) or null.
 * Gradients: dx[i] = w[i]·g[idx[i]], dw[i] = ⟨g[idx[i]], x[i]⟩.
 */
export function scatterAddRows(x: Tensor, idx: Tensor, weights: Tensor | null, outRows: number): Tensor {
  checkIdx("scatterAddRows", idx);
  if (x.ndim === 0 || x.dtype !== "f32") throw new Error(`scatterAddRows: x must be f32 with rank ≥ 1, got ${x}`);
  const n = x.shape[0]!;
  if (idx.numel !== n) throw new Error(`scatterAddRows: ${idx} must have one index per row of ${x}`);
  if (weights && (weights.numel !== n || weights.dtype !== "f32")) throw new Error(`scatterAddRows: weights ${weights} must be f32 with ${n} elements`);
  const dim = n === 0 ? 0 : x.numel / n;
  const be = x.be;
  const out = empty(be, [outRows, ...x.shape.slice(1)]);
  if (n > 0 && dim > 0) be.scatterAddRows(x.view, idx.view, weights ? weights.view : null, out.view, n, dim);
  const inputs = weights ? [x, weights] : [x];
  return record("scatterAddRows", inputs, out, (g) => {
    if (n === 0 || dim === 0) return;
    const needX = x.requiresGrad;
    const needW = !!weights && weights.requiresGrad;
    if (!needX && !needW) return;
    const gRows = scratch(be, n * dim);
    be.gatherRows(g.view, idx.view, gRows.view, n, dim);
    if (needX) {
      accumulateGrad(
        x,
        (dst) => {
          if (weights) be.binary("mul", gRows.view, [n, dim], weights.view, [n, 1], dst);
          else be.copy(gRows.view, dst, n * dim);
        },
        false,
      );
    }
    if (needW) {
      accumulateGrad(
        weights!,
        (dst) => {
          const prod = scratch(be, n * dim);
          be.binary("mul", gRows.view, [n, dim], x.view, [n, dim], prod.view);
          be.reduce("sum", prod.view, dst, n, dim, 1);
          prod.free();
        },
        false,
      );
    }
    gRows.free();
  });
}

/** Top-k along the last axis of x f32 [..., cols] (k ≤ 8, k ≤ cols): values f32 and indices i32,
 * both [..., k], descending, ties to the lower index. Not differentiable. */
export function topk(x: Tensor, k: number): { values: Tensor; indices: Tensor } {
  if (x.dtype !== "f32" || x.ndim === 0) throw new Error(`topk: f32 input with rank ≥ 1 expected, got ${x}`);
  const cols = x.cols;
  if (!Number.isInteger(k) || k < 1 || k > cols || k > 8) throw new Error(`topk: k = ${k} must be in [1, min(8, ${cols})] for ${x}`);
  const rows = x.rows;
  const be = x.be;
  const shape = [...x.shape.slice(0, -1), k];
  const values = empty(be, shape, "f32");
  const indices = empty(be, shape, "i32");
  if (rows > 0) be.topk(x.view, values.view, indices.view, rows, cols, k);
  return { values, indices };
}
