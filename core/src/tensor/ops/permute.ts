/**
 * Axis permutation (`permute`, `transpose`) as an element gather: the Backend contract has no
 * strided-copy op, so out[i] = x[src(i)] is done with `gatherRows` over rows of one element, with an
 * i32 index built on the host (numel entries, uploaded per call). Backward scatters the gradient
 * back with the same index. Costs O(numel) host work and a numel-sized index buffer: fine for
 * occasional layout changes; the models avoid it entirely (attention works on [B, S, H, D]).
 */
import { gradTarget, record } from "../tape.ts";
import { Tensor, empty, fmtShape, fromArray } from "../tensor.ts";

/** Source element of each output element for `shape` permuted by `axes`. */
export function permuteIndex(shape: readonly number[], axes: readonly number[]): Int32Array {
  const n = shape.length;
  const inStrides = new Array<number>(n);
  let s = 1;
  for (let d = n - 1; d >= 0; d--) {
    inStrides[d] = s;
    s *= shape[d]!;
  }
  const outShape = axes.map((a) => shape[a]!);
  const total = s;
  const idx = new Int32Array(total);
  const coord = new Array<number>(n).fill(0);
  for (let i = 0; i < total; i++) {
    let src = 0;
    for (let d = 0; d < n; d++) src += coord[d]! * inStrides[axes[d]!]!;
    idx[i] = src;
    for (let d = n - 1; d >= 0; d--) {
      if (++coord[d]! < outShape[d]!) break;
      coord[d] = 0;
    }
  }
  return idx;
}

/** out = x with axes reordered: out.shape[i] = x.shape[axes[i]] (like `torch.permute`), f32.
 * @throws unless `axes` is a permutation of 0..ndim−1. */
export function permute(x: Tensor, axes: readonly number[]): Tensor {
  const n = x.ndim;
  if (axes.length !== n || [...axes].sort((a, b) => a - b).some((a, i) => a !== i)) {
    throw new Error(`permute: axes [${axes.join(", ")}] are not a permutation of the ${n} axes of ${x}`);
  }
  if (x.dtype !== "f32") throw new Error(`permute: f32 expected, got ${x}`);
  const be = x.be;
  const outShape = axes.map((a) => x.shape[a]!);
  const idx = fromArray(be, permuteIndex(x.shape, axes), [x.numel], "i32");
  const out = empty(be, outShape);
  if (x.numel > 0) be.gatherRows(x.view, idx.view, out.view, x.numel, 1);
  return record("permute", [x], out, (g) => {
    const t = gradTarget(x, "add");
    if (!t || x.numel === 0) return;
    be.scatterAddRows(g.view, idx.view, null, t.view, x.numel, 1);
    t.commit();
  });
}

/** Swap two axes (negative counts from the end). @throws on an axis out of range. */
export function transpose(x: Tensor, dim0: number, dim1: number): Tensor {
  const n = x.ndim;
  const a = dim0 < 0 ? dim0 + n : dim0;
  const b = dim1 < 0 ? dim1 + n : dim1;
  if (a < 0 || a >= n || b < 0 || b >= n) throw new Error(`transpose: axes ${dim0}, ${dim1} out of range for ${x} (shape ${fmtShape(x.shape)})`);
  const axes = Array.from({ length: n }, (_, i) => i);
  axes[a] = b;
  axes[b] = a;
  return permute(x, axes);
}
