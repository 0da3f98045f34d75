/**
 * The experts' weights as the grouped products need them: each expert's weight lives in its own
 * parameter unit, so a grouped matmul over G experts reads them from a transient f32 stack
 * [G, out, in] (one copy per expert, or a cast from a 16-bit expert's storage: nn/unit.ts
 * `workingCopy: false`), and a grouped dW writes into a transient f32 stack that is added back
 * into each expert's gradient. Used by grouped-linear.ts and grouped-swiglu.ts.
 *
 * Stack budget: a stack holds at most `groupedMemory.stackBytes` (512 MiB; at least one expert), so the G
 * groups run as consecutive runs of experts, one grouped product per run over the same rows and
 * offsets (rows outside a run's groups are not touched: Backend.groupedMatmulDev,
 * groupedWeightGrad). At Mixtral-8x7B's layer (8 experts, a weight 14336 × 4096) a whole-layer
 * stack is 1.88e9 bytes, a run of two experts 0.47e9; each group's rows meet the same kernels, so
 * results are the same bits as one product over all groups on the cpu backend (the webgpu one
 * picks tiles by the product's size: equal within f32 rounding).
 */
import type { Backend, Buf, View } from "@zeromoe/kernels";
import { gradTarget, type GradTarget } from "../../tensor/index.ts";
import type { Tensor } from "../../tensor/tensor.ts";

/** Largest f32 weight stack of one grouped product, bytes (512 MiB; see the module comment). */
export const DEFAULT_STACK_BYTES = 512 * 2 ** 20;

/** The transient-memory bounds of the grouped expert ops, read at each call: `stackBytes` the
 * weight stack budget (default {@link DEFAULT_STACK_BYTES}), `chunkElements` the elements per
 * chunk of grouped-swiglu.ts's elementwise backward (default 2²⁴: 64 MiB per f32 temporary).
 * Memory traces of a real shape at a scaled-down size lower both by the scale. */
export const groupedMemory = { stackBytes: DEFAULT_STACK_BYTES, chunkElements: 2 ** 24 };

/** Consecutive runs [g0, count) of G groups of `groupBytes` each, every run at most `budget`
 * bytes (at least one group per run). */
export function groupRuns(G: number, groupBytes: number, budget: number): [number, number][] {
  const per = Math.max(1, Math.floor(budget / Math.max(1, groupBytes)));
  const runs: [number, number][] = [];
  for (let g0 = 0; g0 < G; g0 += per) runs.push([g0, Math.min(per, G - g0)]);
  return runs;
}

/** `dst` = `src` for n elements: a copy between equal dtypes, else a cast (f32 ↔ bf16/f16, round
 * to nearest even). */
export function convert(be: Backend, src: View, dst: View, n: number): void {
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

/** A fresh f32 buffer [count, n] holding weights g0 … g0 + count − 1 in order (one copy or cast
 * each). A group the host knows to have no rows is not read (its slot holds anything: the grouped
 * products read no weight of a group without rows): its unit may not be resident (the offload
 * plugin skips fetching experts no rank routed tokens to). Not zeroed first (contents "any"). */
function stackWeights(be: Backend, weights: readonly Tensor[], rowsPerGroup: ArrayLike<number> | null, n: number, g0: number, count: number): Buf {
  const stack = be.alloc("f32", Math.max(1, count * n), "activation", "any");
  for (let i = 0; i < count; i++) {
    if (!rowsPerGroup || rowsPerGroup[g0 + i]! > 0) convert(be, weightSource(weights[g0 + i]!), { buf: stack, off: i * n }, n);
  }
  return stack;
}

/** Sizes of a grouped product over R rows: out [R, N] (+)= x [R, K] · op(W_g), W_g stored
 * [out, in] (`transB`: op(W) = Wᵀ, so N = out, K = in; else N = in, K = out). */
export interface GroupedProductSpec {
  R: number;
  N: number;
  K: number;
  transB: boolean;
  accumulate: boolean;
}

/**
 * out (+)= x · op(W_g) on each group's rows, the G weights stacked run by run within `budget`
 * bytes (module comment). x, out f32 views; offsets i32 [G + 1] on the device.
 */
export function groupedProduct(be: Backend, x: View, weights: readonly Tensor[], rowsPerGroup: ArrayLike<number> | null, offsets: View, out: View, spec: GroupedProductSpec, budget = groupedMemory.stackBytes): void {
  const wn = spec.N * spec.K;
  for (const [g0, count] of groupRuns(weights.length, 4 * wn, budget)) {
    const stack = stackWeights(be, weights, rowsPerGroup, wn, g0, count);
    be.groupedMatmulDev(x, { buf: stack, off: 0 }, out, { buf: offsets.buf, off: offsets.off + g0 }, { G: count, R: spec.R, N: spec.N, K: spec.K, transB: spec.transB, accumulate: spec.accumulate });
    be.free(stack);
  }
}

/**
 * The weights' gradients of a grouped linear y_g = x_g · W_gᵀ (W_g [M, N] = [out, in]): for each
 * group with `need[g]`, dW_g += dy[rows_g]ᵀ · x[rows_g] — the current gradient stacked (cast in
 * from a 16-bit sink), one grouped dW per run of groups within `budget` bytes, written back (cast
 * back, rounded once). dy f32 [R, M], x f32 [R, N], offsets i32 [G + 1] on the device.
 */
export function groupedWeightGrads(be: Backend, weights: readonly Tensor[], need: readonly boolean[], dy: View, x: View, offsets: View, R: number, M: number, N: number, budget = groupedMemory.stackBytes): void {
  const wn = M * N;
  for (const [g0, count] of groupRuns(weights.length, 4 * wn, budget)) {
    const targets: (GradTarget | null)[] = [];
    for (let i = 0; i < count; i++) targets.push(need[g0 + i] ? gradSink(weights[g0 + i]!) : null);
    if (targets.every((t) => t === null)) continue;
    // every slot whose gradient is written back is read in first: the rest may hold anything
    const gstack = be.alloc("f32", Math.max(1, count * wn), "activation", "any");
    targets.forEach((t, i) => {
      if (t) convert(be, t.view, { buf: gstack, off: i * wn }, wn);
    });
    be.groupedWeightGrad(dy, x, { buf: gstack, off: 0 }, { buf: offsets.buf, off: offsets.off + g0 }, { G: count, R, M, N, accumulate: true });
    targets.forEach((t, i) => {
      if (!t) return;
      convert(be, { buf: gstack, off: i * wn }, t.view, wn);
      t.commit();
    });
    be.free(gstack);
  }
}
