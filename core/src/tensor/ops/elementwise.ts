/**
 * Elementwise differentiable ops (f32): broadcasting add/sub/mul/div, unary activations, scale and
 * affine. Backward of a broadcast operand sums the gradient over its broadcast axes.
 */
import type { UnaryOp, View } from "@zeromoe/kernels";
import { broadcastShape, reduceToShape } from "../broadcast.ts";
import { accumulateGrad, passGrad, record, scratch } from "../tape.ts";
import { Tensor, empty } from "../tensor.ts";

function checkF32(op: string, ...ts: Tensor[]): void {
  for (const t of ts) if (t.dtype !== "f32") throw new Error(`${op}: expected an f32 tensor, got ${t}`);
}

type Bin = "add" | "sub" | "mul" | "div";

function binaryOp(op: Bin, a: Tensor, b: Tensor): Tensor {
  checkF32(op, a, b);
  const shape = broadcastShape(a.shape, b.shape);
  const be = a.be;
  const out = empty(be, shape);
  if (out.numel > 0) be.binary(op, a.view, a.shape, b.view, b.shape, out.view);
  return record(op, [a, b], out, (g) => {
    // dOperand = reduce_to_shape(g ⊙ factor) for each operand needing it.
    const grad = (t: Tensor, factor: Tensor | null, sign: number, divBy: Tensor | null, mulOut: boolean): void => {
      accumulateGrad(
        t,
        (dst, acc) => {
          if (!factor && !divBy && !mulOut && sign === 1) {
            reduceToShape(be, g.view, shape, t.shape, dst, acc);
            return;
          }
          // A chain of elementwise steps over the output's shape (backend outputs never alias
          // inputs). When t has the output's shape and we overwrite, the last step writes straight
          // into dst; otherwise into a temporary that is then reduced (or added) into dst.
          const steps: ((src: View, d: View) => void)[] = [];
          if (mulOut) steps.push((src, d) => be.binary("mul", src, shape, out.view, shape, d));
          else if (factor) steps.push((src, d) => be.binary("mul", src, shape, factor.view, factor.shape, d));
          if (divBy) steps.push((src, d) => be.binary("div", src, shape, divBy.view, divBy.shape, d));
          if (sign !== 1) steps.push((src, d) => be.affine(src, d, out.numel, sign, 0));
          const direct = sameShape(t.shape, shape) && !acc;
          const temps: { view: View; free(): void }[] = [];
          let cur: View = g.view;
          steps.forEach((step, i) => {
            let d: View;
            if (direct && i === steps.length - 1) d = dst;
            else {
              const t2 = scratch(be, out.numel);
              temps.push(t2);
              d = t2.view;
            }
            step(cur, d);
            cur = d;
          });
          if (!direct) reduceToShape(be, cur, shape, t.shape, dst, acc);
          for (const t2 of temps) t2.free();
        },
        true,
      );
    };
    switch (op) {
      // For add/sub, an operand of the output's shape may take `g` itself (no copy) — done last,
      // after every read of g, and only when the two operands are different tensors.
      case "add":
        grad(a, null, 1, null, false);
        if (!(b !== a && sameShape(b.shape, shape) && passGrad(b, g))) grad(b, null, 1, null, false);
        break;
      case "sub":
        grad(b, null, -1, null, false);
        if (!(a !== b && sameShape(a.shape, shape) && passGrad(a, g))) grad(a, null, 1, null, false);
        break;
      case "mul":
        grad(a, b, 1, null, false);
        grad(b, a, 1, null, false);
        break;
      case "div":
        // d/da (a/b) = 1/b; d/db (a/b) = −(a/b)/b = −out/b.
        grad(a, null, 1, b, false);
        grad(b, null, -1, b, true);
        break;
    }
  });
}

/** a + b with numpy broadcasting (f32). Output has the broadcast shape. @throws if shapes don't broadcast. */
export function add(a: Tensor, b: Tensor): Tensor {
  return binaryOp("add", a, b);
}

/** a − b with numpy broadcasting (f32). */
export function sub(a: Tensor, b: Tensor): Tensor {
  return binaryOp("sub", a, b);
}

/** a ⊙ b with numpy broadcasting (f32). */
export function mul(a: Tensor, b: Tensor): Tensor {
  return binaryOp("mul", a, b);
}

/** a / b with numpy broadcasting (f32). */
export function div(a: Tensor, b: Tensor): Tensor {
  return binaryOp("div", a, b);
}

/** y = op(x) elementwise (f32); backward uses the backend's `unaryBackward` (derivative at x).
 * gelu_tanh/gelu_erf are GELU's tanh approximation and exact erf form (Hendrycks & Gimpel 2016);
 * silu(x) = x·sigmoid(x) (Elfwing et al. 2017). */
export function unary(op: UnaryOp, x: Tensor): Tensor {
  checkF32(op, x);
  const be = x.be;
  const out = empty(be, x.shape);
  if (x.numel > 0) be.unary(op, x.view, out.view, x.numel);
  return record(op, [x], out, (g) => {
    accumulateGrad(x, (dst) => be.unaryBackward(op, x.view, g.view, dst, x.numel), false);
  });
}

/** silu(x) = x·σ(x). */
export const silu = (x: Tensor): Tensor => unary("silu", x);
/** GELU, tanh approximation. */
export const gelu = (x: Tensor): Tensor => unary("gelu_tanh", x);
/** GELU, exact (erf). */
export const geluErf = (x: Tensor): Tensor => unary("gelu_erf", x);
/** eˣ. */
export const exp = (x: Tensor): Tensor => unary("exp", x);
/** ln x. */
export const log = (x: Tensor): Tensor => unary("log", x);
/** −x. */
export const neg = (x: Tensor): Tensor => unary("neg", x);
/** √x. */
export const sqrt = (x: Tensor): Tensor => unary("sqrt", x);
/** 1/√x. */
export const rsqrt = (x: Tensor): Tensor => unary("rsqrt", x);
/** max(x, 0). */
export const relu = (x: Tensor): Tensor => unary("relu", x);
/** σ(x) = 1/(1+e^−x). */
export const sigmoid = (x: Tensor): Tensor => unary("sigmoid", x);
/** x². */
export const square = (x: Tensor): Tensor => unary("square", x);

/** y = alpha·x + beta elementwise (f32). */
export function affine(x: Tensor, alpha: number, beta = 0): Tensor {
  checkF32("affine", x);
  const be = x.be;
  const out = empty(be, x.shape);
  if (x.numel > 0) be.affine(x.view, out.view, x.numel, alpha, beta);
  return record("affine", [x], out, (g) => {
    accumulateGrad(
      x,
      (dst, acc) => {
        if (acc) be.axpy(alpha, g.view, dst, x.numel);
        else be.affine(g.view, dst, x.numel, alpha, 0);
      },
      true,
    );
  });
}

/** y = alpha·x. */
export function scale(x: Tensor, alpha: number): Tensor {
  return affine(x, alpha, 0);
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}
