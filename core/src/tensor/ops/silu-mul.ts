/**
 * SwiGLU's activation as one differentiable op (Shazeer 2020, "GLU Variants Improve Transformer"):
 * siluMul(gate, up) = silu(gate) ⊙ up, the middle of the Llama/Mixtral feed-forward
 * down(silu(gate(x)) ⊙ up(x)). One backend kernel forward (`Backend.siluMul`) and one backward
 * (`Backend.siluMulBackward`, both input gradients at once) instead of silu + mul forward and two
 * muls + silu' backward; the silu output is never stored. On the cpu backend the values and
 * gradients equal `mul(silu(gate), up)` bit for bit.
 */
import { gradTarget, record, scratch } from "../tape.ts";
import { fmtShape, uninit, type Tensor } from "../tensor.ts";

/**
 * silu(gate) ⊙ up, elementwise over two f32 tensors of the same shape (no broadcasting); the output
 * has that shape. Backward writes d gate = (g·up)·silu'(gate) and d up = g·silu(gate) in one kernel.
 * @throws if a tensor is not f32 or the shapes differ.
 */
export function siluMul(gate: Tensor, up: Tensor): Tensor {
  for (const t of [gate, up]) if (t.dtype !== "f32") throw new Error(`siluMul: expected f32 tensors, got ${t}`);
  if (gate.shape.length !== up.shape.length || gate.shape.some((d, i) => d !== up.shape[i])) {
    throw new Error(`siluMul: gate ${fmtShape(gate.shape)} and up ${fmtShape(up.shape)} must have the same shape`);
  }
  const be = gate.be;
  const n = gate.numel;
  const out = uninit(be, gate.shape); // siluMul sets all n
  if (n > 0) be.siluMul(gate.view, up.view, out.view, n);
  return record("silu_mul", [gate, up], out, (g) => {
    if (n === 0) return;
    const tg = gradTarget(gate, "overwrite", true); // siluMulBackward sets all n of both
    const tu = gradTarget(up, "overwrite", true);
    // an input that needs no gradient still gets its half written, into a scratch buffer
    const sg = tg ? null : scratch(be, n);
    const su = tu ? null : scratch(be, n);
    be.siluMulBackward(gate.view, up.view, g.view, (tg ?? sg)!.view, (tu ?? su)!.view, n);
    tg?.commit();
    tu?.commit();
    sg?.free();
    su?.free();
  });
}
