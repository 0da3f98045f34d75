/**
 * Shape ops without arithmetic: reshape (a view), row slices (a view) and row concatenation (a
 * copy). "Rows" means the tensor seen as [shape[0], rest…]: rows are contiguous, so a row slice is
 * an element offset into the same buffer.
 */
import type { View } from "@zeromoe/kernels";
import { accumulateGrad, gradTarget, passGrad, record } from "../tape.ts";
import { Tensor, empty, fmtShape, numelOf } from "../tensor.ts";

/** A view of `x` with a new shape of the same numel. One dimension may be −1 (inferred).
 * Backward passes the gradient through unchanged. @throws on a numel mismatch. */
export function reshape(x: Tensor, shape: readonly number[]): Tensor {
  const s = [...shape];
  const inferAt = s.indexOf(-1);
  if (inferAt >= 0) {
    const rest = numelOf(s.filter((_, i) => i !== inferAt));
    if (rest === 0 || x.numel % rest !== 0) throw new Error(`reshape: cannot infer −1 in ${fmtShape(shape)} for ${x}`);
    s[inferAt] = x.numel / rest;
  }
  if (numelOf(s) !== x.numel) throw new Error(`reshape: ${x} has ${x.numel} elements, shape ${fmtShape(shape)} has ${numelOf(s)}`);
  const out = new Tensor(x.be, s, x.dtype, { base: x, off: 0 });
  const be = x.be;
  return record("reshape", [x], out, (g) => {
    if (passGrad(x, g)) return;
    accumulateGrad(
      x,
      (dst, acc) => {
        if (acc) be.axpy(1, g.view, dst, x.numel);
        else be.copy(g.view, dst, x.numel);
      },
      true,
    );
  });
}

/** Rows [start, start+count) of `x` (along axis 0), as a view sharing `x`'s buffer.
 * @throws if the range is outside [0, shape[0]]. */
export function sliceRows(x: Tensor, start: number, count: number): Tensor {
  if (x.ndim === 0) throw new Error(`sliceRows: ${x} is a scalar`);
  const n0 = x.shape[0]!;
  if (!Number.isInteger(start) || !Number.isInteger(count) || start < 0 || count < 0 || start + count > n0) {
    throw new Error(`sliceRows: rows [${start}, ${start + count}) out of range for ${x} (${n0} rows)`);
  }
  const rowSize = n0 === 0 ? 0 : x.numel / n0;
  const shape = [count, ...x.shape.slice(1)];
  const off = start * rowSize;
  const be = x.be;
  // A view; for a parameter `x` the data still resolves through its unit at use time.
  const out = new Tensor(be, shape, x.dtype, { base: x, off });
  return record("sliceRows", [x], out, (g) => {
    const t = gradTarget(x, "add");
    if (t) {
      be.axpy(1, g.view, shifted(t.view, off), out.numel);
      t.commit();
    }
  });
}

function shifted(v: View, by: number): View {
  return { buf: v.buf, off: v.off + by };
}

/** Concatenate along axis 0 (all other dims equal) into a new tensor. Backward copies each slice
 * of the gradient to its input. @throws on mismatched trailing dims or an empty list. */
export function concatRows(xs: readonly Tensor[]): Tensor {
  if (xs.length === 0) throw new Error("concatRows: empty list");
  const tail = xs[0]!.shape.slice(1);
  let rows = 0;
  for (const x of xs) {
    if (x.ndim === 0 || x.shape.length !== tail.length + 1 || x.shape.slice(1).some((d, i) => d !== tail[i])) {
      throw new Error(`concatRows: ${x} does not match trailing shape ${fmtShape(tail)}`);
    }
    if (x.dtype !== xs[0]!.dtype) throw new Error(`concatRows: dtype ${x.dtype} differs from ${xs[0]!.dtype}`);
    rows += x.shape[0]!;
  }
  const be = xs[0]!.be;
  const out = empty(be, [rows, ...tail], xs[0]!.dtype);
  const offs: number[] = [];
  let off = 0;
  for (const x of xs) {
    offs.push(off);
    if (x.numel > 0) be.copy(x.view, { buf: out.view.buf, off: out.view.off + off }, x.numel);
    off += x.numel;
  }
  return record("concatRows", [...xs], out, (g) => {
    xs.forEach((x, i) => {
      const src = { buf: g.view.buf, off: g.view.off + offs[i]! };
      accumulateGrad(
        x,
        (dst, acc) => {
          if (acc) be.axpy(1, src, dst, x.numel);
          else be.copy(src, dst, x.numel);
        },
        true,
      );
    });
  });
}
