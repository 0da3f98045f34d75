/**
 * `groupedLinear`: the projection of every local expert in one op over variable-length row
 * segments whose offsets live on the device (torch `_grouped_mm`, Megatron-Core's `GroupedMLP`,
 * MegaBlocks): y[r] = x[r]·W_gᵀ for the rows r of group g.
 *
 * The experts' weights live in separate parameter units (each expert is a ZeRO unit), so the op
 * stacks them into a transient [G, out, in] buffer with one buffer copy per expert (copies, not
 * dispatches, on the webgpu backend), runs one grouped matmul (Backend.groupedMatmulDev), and frees
 * the stack (grouped-weights.ts: runs of experts within a stack budget). The backward stacks the weights again (read through their tensors at backward time, so
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
import { accumulateGrad, record } from "../../tensor/index.ts";
import { empty, type Tensor } from "../../tensor/tensor.ts";
import { groupedMemory, groupedProduct, groupedWeightGrads } from "./grouped-weights.ts";

/**
 * x f32 [R, in] grouped by rows; weights: G tensors [out, in] (nn.Linear layout); offsets: i32
 * [G + 1] on the device (non-decreasing, offsets[G] ≤ R; rows past offsets[G] get zeros).
 * `rowsPerGroup`: the groups' row counts when the host knows them (an expert with 0 rows then gets
 * no gradient contribution at all, as a per-expert loop that skips it), or null (every expert's
 * gradient is accumulated, + 0 for an empty one). `stackBytes`: the weight stack budget
 * (grouped-weights.ts). Returns y f32 [R, out].
 * @throws on shape or dtype mismatches (naming the tensors).
 */
export function groupedLinear(x: Tensor, weights: readonly Tensor[], offsets: Tensor, rowsPerGroup: ArrayLike<number> | null, stackBytes = groupedMemory.stackBytes): Tensor {
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
  const out = empty(be, [R, outF]);
  if (R > 0 && outF > 0) groupedProduct(be, x.view, weights, rowsPerGroup, offsets.view, out.view, { R, N: outF, K: inF, transB: true, accumulate: false }, stackBytes);
  return record("groupedLinear", [x, ...weights], out, (g) => {
    if (R === 0 || outF === 0 || inF === 0) return;
    const needW = weights.map((w, i) => w.requiresGrad && (!rowsPerGroup || rowsPerGroup[i]! > 0));
    if (!x.requiresGrad && !needW.some((b) => b)) return;
    accumulateGrad(x, (dst, acc) => groupedProduct(be, g.view, weights, rowsPerGroup, offsets.view, dst, { R, N: inF, K: outF, transB: false, accumulate: acc }, stackBytes), true);
    // dW: stack the current gradients, accumulate dyᵀ·x per group, write back
    if (needW.some((b) => b)) groupedWeightGrads(be, weights, needW, g.view, x.view, offsets.view, R, outF, inF, stackBytes);
  });
}
