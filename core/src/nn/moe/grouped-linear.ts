/**
 * `groupedLinear`: the projection of every local expert in one op over variable-length row
 * segments whose offsets live on the device (torch `_grouped_mm`, Megatron-Core's `GroupedMLP`,
 * MegaBlocks): y[r] = x[r]·W_gᵀ for the rows r of group g.
 *
 * The experts' weights live in separate parameter units (each expert is a ZeRO unit), so the op
 * stacks them into one transient [G, out, in] buffer with one buffer copy per expert (copies, not
 * dispatches, on the webgpu backend), runs one grouped matmul (Backend.groupedMatmulDev), and frees
 * the stack. The backward stacks the weights again (read through their tensors at backward time, so
 * ZeRO-3's gathered buffers are used), computes dX with one grouped matmul and every expert's dW
 * with one Backend.groupedWeightGrad into a stack of the experts' current gradients, which is
 * copied back — so each dW is `grad + dyᵀ·x` rounded once, exactly what a per-expert `linear`'s
 * accumulating matmul computes (bit-identical on the cpu backend).
 *
 * 16-bit experts without an f32 working copy (nn/unit.ts `workingCopy: false`, the models'
 * expert units in bf16/fp16 jobs): the stack is filled by casting each weight's bf16/f16 storage
 * (`Parameter.readView`) — the values an f32 working copy would hold, without the copy of every
 * expert of the layer — and each expert's gradient slot is cast in from its 16-bit gradient
 * (`Parameter.gradSinkView`) and cast back after the grouped dW (rounded to nearest even once: the
 * bits of the f32-accumulator path when a weight gets one contribution per micro-batch, as in a
 * training step).
 */
import { accumulateGrad, gradTarget, record, type GradTarget } from "../../tensor/index.ts";
import { empty, type Tensor } from "../../tensor/tensor.ts";
import type { Backend, Buf, View } from "@zeromoe/kernels";

/**
 * x f32 [R, in] grouped by rows; weights: G tensors [out, in] (nn.Linear layout); offsets: i32
 * [G + 1] on the device (non-decreasing, offsets[G] ≤ R; rows past offsets[G] get zeros).
 * `rowsPerGroup`: the groups' row counts when the host knows them (an expert with 0 rows then gets
 * no gradient contribution at all, as a per-expert loop that skips it), or null (every expert's
 * gradient is accumulated, + 0 for an empty one). Returns y f32 [R, out].
 * @throws on shape or dtype mismatches (naming the tensors).
 */
export function groupedLinear(x: Tensor, weights: readonly Tensor[], offsets: Tensor, rowsPerGroup: ArrayLike<number> | null): Tensor {
  const G = weights.length;
  if (x.ndim !== 2 || x.dtype !== "f32") throw new Error(`groupedLinear: x must be f32 [rows, in], got ${x}`);
  if (G === 0) throw new Error("groupedLinear: no weights");
  const [outF, inF] = weights[0]!.shape as [number, number];
  for (const w of weights) {
    if (w.ndim !== 2 || w.shape[0] !== outF || w.shape[1] !== inF || w.dtype !== "f32") throw new Error(`groupedLinear: every weight must be f32 [${outF}, ${inF}], got ${w}`);
  }
  if (x.shape[1] !== inF) throw new Error(`groupedLinear: x ${x} has ${x.shape[1]} features, the weights expect ${inF}`);
  if (offsets.dtype !== "i32" || offsets.numel !== G + 1) throw new Error(`groupedLinear: offsets must be i32 [${G + 1}], got ${offsets}`);
  if (rowsPerGroup && rowsPerGroup.length !== G) throw new Error(`groupedLinear: ${rowsPerGroup.length} row counts for ${G} groups`);
  const R = x.shape[0]!;
  const be = x.be;
  const wn = outF * inF;
  const out = empty(be, [R, outF]);
  if (R > 0 && outF > 0) {
    const stack = stackWeights(be, weights, rowsPerGroup, wn);
    be.groupedMatmulDev(x.view, { buf: stack, off: 0 }, out.view, offsets.view, { G, R, N: outF, K: inF, transB: true });
    be.free(stack);
  }
  return record("groupedLinear", [x, ...weights], out, (g) => {
    if (R === 0 || outF === 0 || inF === 0) return;
    const needW = weights.map((w, i) => w.requiresGrad && (!rowsPerGroup || rowsPerGroup[i]! > 0));
    if (!x.requiresGrad && !needW.some((b) => b)) return;
    const stack = stackWeights(be, weights, rowsPerGroup, wn);
    accumulateGrad(x, (dst, acc) => be.groupedMatmulDev(g.view, { buf: stack, off: 0 }, dst, offsets.view, { G, R, N: inF, K: outF, accumulate: acc }), true);
    be.free(stack);
    if (!needW.some((b) => b)) return;
    // dW: stack the current gradients, accumulate dyᵀ·x per group in one op, copy back
    const targets: (GradTarget | null)[] = weights.map((w, i) => (needW[i] ? gradSink(w) : null));
    // every slot whose gradient is copied back is copied in first: the rest may hold anything
    const gstack = be.alloc("f32", G * wn, "activation", "any");
    targets.forEach((t, i) => {
      if (t) convert(be, t.view, { buf: gstack, off: i * wn }, wn);
    });
    be.groupedWeightGrad(g.view, x.view, { buf: gstack, off: 0 }, offsets.view, { G, R, M: outF, N: inF, accumulate: true });
    targets.forEach((t, i) => {
      if (!t) return;
      convert(be, { buf: gstack, off: i * wn }, t.view, wn);
      t.commit();
    });
    be.free(gstack);
  });
}

/** `dst` = `src` for n elements: a copy between equal dtypes, else a cast (f32 ↔ bf16/f16, round
 * to nearest even). */
function convert(be: Backend, src: View, dst: View, n: number): void {
  if (src.buf.dtype === dst.buf.dtype) be.copy(src, dst, n);
  else be.cast(src, dst, n);
}

/** The values of weight `w` as stored: a parameter's `readView` (f32, or bf16/f16 for a unit
 * without a working copy), else the tensor's f32 view. */
function weightSource(w: Tensor): View {
  return w.param?.readView ? w.param.readView() : w.view;
}

/** Where `w`'s gradient goes (it requires one): a parameter's `gradSinkView` (f32 accumulator, or
 * the 16-bit gradient of a unit without a working copy), else the tape's target for an add. */
function gradSink(w: Tensor): GradTarget {
  if (w.param?.gradSinkView) return { view: w.param.gradSinkView(), commit: () => {} };
  return gradTarget(w, "add")!;
}

/** A fresh f32 buffer [G, n] holding the G weights in order (one copy or cast each). A group the host
 * knows to have no rows is not read (its slot holds anything: the grouped products read no weight
 * of a group without rows): its unit may not be resident (the offload plugin skips fetching experts
 * no rank routed tokens to). The buffer is not zeroed first (`alloc` contents "any"). */
function stackWeights(be: Backend, weights: readonly Tensor[], rowsPerGroup: ArrayLike<number> | null, n: number): Buf {
  const stack = be.alloc("f32", Math.max(1, weights.length * n), "activation", "any");
  weights.forEach((w, i) => {
    if (!rowsPerGroup || rowsPerGroup[i]! > 0) convert(be, weightSource(w), { buf: stack, off: i * n }, n);
  });
  return stack;
}
