/**
 * Residual add + RMSNorm as one differentiable op (the pre-norm decoder's
 * `h2 = h + a; n = rmsnorm(h2)·w`; RMSNorm: Zhang & Sennrich 2019, Hugging Face `LlamaRMSNorm`).
 * Forward is one backend kernel (`Backend.addRmsnorm`) that writes both the sum and the normed rows;
 * backward (`Backend.addRmsnormBackward`) adds the gradient the sum received from its other
 * consumers into the norm's dx in the same kernel, instead of a temporary and an `axpy`. On the cpu
 * backend values and gradients equal `rmsnorm(add(x, r), w, eps)` bit for bit.
 */
import { accumulateGrad, adoptGrad, gradTarget, isGradEnabled, recordNode, scratch, takeGrad } from "../tape.ts";
import { Tensor, empty, fmtShape } from "../tensor.ts";

/**
 * sum = x + r and normed = rmsnorm(sum)·w over the last axis: x, r [..., C] (same shape), w [C] →
 * both [..., C], f32. Differentiable in x, r, w through both outputs.
 * @throws if a tensor is not f32, x and r differ in shape, or w is not [C].
 */
export function addRmsnorm(x: Tensor, r: Tensor, w: Tensor, eps: number): { sum: Tensor; normed: Tensor } {
  for (const t of [x, r, w]) if (t.dtype !== "f32") throw new Error(`addRmsnorm: expected f32 tensors, got ${t}`);
  if (x.shape.length !== r.shape.length || x.shape.some((d, i) => d !== r.shape[i])) throw new Error(`addRmsnorm: x ${fmtShape(x.shape)} and r ${fmtShape(r.shape)} must have the same shape`);
  if (w.ndim !== 1 || w.shape[0] !== x.cols) throw new Error(`addRmsnorm: weight ${w} must have shape [${x.cols}] to match input ${x}`);
  const be = x.be;
  const rows = x.rows;
  const cols = x.cols;
  const n = x.numel;
  const sum = empty(be, x.shape);
  const normed = empty(be, x.shape);
  const rstd = empty(be, [Math.max(rows, 1)]);
  if (rows > 0 && cols > 0) be.addRmsnorm(x.view, r.view, w.view, sum.view, normed.view, rstd.view, rows, cols, eps);
  if (!isGradEnabled() || !(x.requiresGrad || r.requiresGrad || w.requiresGrad)) {
    rstd.dispose();
    return { sum, normed };
  }
  recordNode({
    kind: "op",
    name: "add_rmsnorm",
    inputs: [x, r, w],
    out: normed,
    extraOuts: [sum],
    backward: (gNormed) => {
      // the gradient `sum` received from its other consumers (the next residual add), now ours
      const gSum = takeGrad(sum);
      if (n === 0) {
        gSum?.dispose();
        rstd.dispose();
        return;
      }
      // dx = gSum + rmsnorm'(gNormed), written in place into gSum's buffer (or a fresh one)
      const total = gSum ?? new Tensor(be, x.shape, "f32", { buf: be.alloc("f32", n, "activation"), owns: true });
      const tw = gradTarget(w, "add");
      const sw = tw ? null : scratch(be, cols);
      if (sw) be.fill(sw.view, 0, cols);
      be.addRmsnormBackward(sum.view, w.view, rstd.view, gNormed.view, gSum ? gSum.view : null, total.view, (tw ?? sw)!.view, rows, cols);
      tw?.commit();
      sw?.free();
      rstd.dispose();
      // as add's backward: x gets a copy (or an add into its gradient), r takes the buffer itself
      accumulateGrad(x, (dst, acc) => (acc ? be.axpy(1, total.view, dst, n) : be.copy(total.view, dst, n)), true);
      adoptGrad(r, total);
    },
  });
  return { sum, normed };
}
