/**
 * The MoE permutation as device tensors, and the two differentiable row moves built on it
 * (Megatron-Core's `permute` / `unpermute`; torchtitan's token reorderer):
 *
 *   permuteByExpert(idx)   stable counting sort of the T·k (token, slot) pairs by expert on the
 *                          device (Backend.moePermute): counts, offsets, rowOfPair, tokenOfRow,
 *                          pairOfRow — nothing read to the host
 *   dispatchRows(x, perm)  xs[r] = x[tokenOfRow[r]]                           [R, hidden]
 *                          backward: dx[t] += the gradients of t's rows, rows ascending
 *   combineRows(ys, perm)  out[t] = Σ over t's kept pairs, rows ascending, of w_p · ys[row_p]
 *                          backward: dys[r] = w_{pair r}·g[token r]; dw_p = ⟨g[t], ys[row_p]⟩
 *
 * Rows are grouped by expert ascending and, within an expert, by pair (= token) order, so "rows
 * ascending" is "experts ascending" per token — the summation order of Hugging Face's
 * `MixtralExperts` loop (`index_add_` per expert) and of the host plan this replaces
 * (dispatcher.ts `permutePlan`). On the cpu backend every op here adds the same terms in the same
 * order as the gatherRows / scatterAddRows path it replaces, so results are bit-identical.
 */
import type { Tensor } from "../../tensor/tensor.ts";
import { empty } from "../../tensor/tensor.ts";
import { accumulateGrad, gradTarget, record, scratch } from "../../tensor/index.ts";

/** The permutation of one layer's pairs by expert, on the device (all i32). */
export interface DevicePermutation {
  /** Experts E (bins of the sort). */
  readonly numExperts: number;
  /** Slots per token k. */
  readonly topK: number;
  /** Tokens T (pairs = T·k). */
  readonly tokens: number;
  /** Kept pairs per expert [E]. */
  readonly counts: Tensor;
  /** Exclusive prefix sum of counts [E + 1]: expert e owns rows [offsets[e], offsets[e+1]). */
  readonly offsets: Tensor;
  /** Row of pair p in expert order, −1 for a dropped pair [T·k]. */
  readonly rowOfPair: Tensor;
  /** Token at row r, −1 past the kept total [T·k]. */
  readonly tokenOfRow: Tensor;
  /** Pair (t·k + slot) at row r, −1 past the kept total [T·k]. */
  readonly pairOfRow: Tensor;
}

/**
 * Stable counting sort of the pairs by expert on the device. idx: i32 [T·k] (device), the expert
 * of each pair, −1 = dropped. @throws when idx is not i32, its length is not a multiple of k, or
 * E < 1.
 */
export function permuteByExpert(idx: Tensor, numExperts: number, topK: number): DevicePermutation {
  if (idx.dtype !== "i32") throw new Error(`permuteByExpert: expert indices must be i32, got ${idx}`);
  if (!Number.isInteger(topK) || topK < 1 || idx.numel % topK !== 0) throw new Error(`permuteByExpert: ${idx.numel} pairs are not tokens × k = ${topK}`);
  if (!Number.isInteger(numExperts) || numExperts < 1) throw new Error(`permuteByExpert: numExperts must be a positive integer, got ${numExperts}`);
  const be = idx.be;
  const n = idx.numel;
  const counts = empty(be, [numExperts], "i32");
  const offsets = empty(be, [numExperts + 1], "i32");
  const rowOfPair = empty(be, [n], "i32");
  const tokenOfRow = empty(be, [n], "i32");
  const pairOfRow = empty(be, [n], "i32");
  be.moePermute(idx.view, n, topK, numExperts, counts.view, offsets.view, rowOfPair.view, tokenOfRow.view, pairOfRow.view);
  return { numExperts, topK, tokens: n / topK, counts, offsets, rowOfPair, tokenOfRow, pairOfRow };
}

/**
 * The dispatch gather: x f32 [T, hidden] → xs [rows, hidden], xs[r] = x[tokenOfRow[r]] (a zero
 * row where tokenOfRow is −1). `rows` ≤ T·k: the kept total when the host knows it, else T·k.
 * Backward adds each token's row gradients into dx, rows ascending (Backend.moeCombine without
 * weights), onto whatever gradient x already has.
 */
export function dispatchRows(x: Tensor, perm: DevicePermutation, rows: number): Tensor {
  const T = perm.tokens;
  if (x.ndim !== 2 || x.shape[0] !== T || x.dtype !== "f32") throw new Error(`dispatchRows: x must be f32 [${T}, hidden], got ${x}`);
  if (!Number.isInteger(rows) || rows < 0 || rows > T * perm.topK) throw new Error(`dispatchRows: rows ${rows} outside [0, ${T * perm.topK}]`);
  const H = x.shape[1]!;
  const be = x.be;
  const out = empty(be, [rows, H]);
  if (rows > 0 && H > 0) be.gatherRows(x.view, perm.tokenOfRow.view, out.view, rows, H);
  return record("moeDispatchRows", [x], out, (g) => {
    if (rows === 0 || H === 0) return;
    const t = gradTarget(x, "add");
    if (!t) return;
    be.moeCombine(g.view, rows, perm.rowOfPair.view, null, t.view, T, perm.topK, H, true);
    t.commit();
  });
}

/**
 * The weighted combine: ys f32 [rows, hidden] (expert outputs in permuted row order), weights f32
 * [T·k] (the pairs' combine weights, differentiable) → out [T, hidden], out[t] = Σ over t's kept
 * pairs, rows ascending, of w_p·ys[row_p] (Backend.moeCombine). Gradients: dys[r] =
 * w_{pairOfRow[r]}·g[tokenOfRow[r]] (gather + multiply), dw_p = Σ_c g[t, c]·ys[row_p, c] (multiply
 * + row sum, then gathered to pair order; 0 for a dropped pair).
 */
export function combineRows(ys: Tensor, perm: DevicePermutation, weights: Tensor): Tensor {
  const T = perm.tokens;
  const k = perm.topK;
  const R = ys.shape[0]!;
  if (ys.ndim !== 2 || ys.dtype !== "f32" || R > T * k) throw new Error(`combineRows: expert output must be f32 [rows ≤ ${T * k}, hidden], got ${ys}`);
  if (weights.numel !== T * k || weights.dtype !== "f32") throw new Error(`combineRows: weights ${weights} must be f32 with ${T * k} elements`);
  const H = ys.shape[1]!;
  const be = ys.be;
  const out = empty(be, [T, H]);
  if (T > 0 && H > 0) be.moeCombine(ys.view, R, perm.rowOfPair.view, weights.view, out.view, T, k, H, false);
  return record("moeCombineRows", [ys, weights], out, (g) => {
    if (R === 0 || H === 0) return;
    const needX = ys.requiresGrad;
    const needW = weights.requiresGrad;
    if (!needX && !needW) return;
    const gRows = scratch(be, R * H);
    be.gatherRows(g.view, perm.tokenOfRow.view, gRows.view, R, H);
    if (needX) {
      accumulateGrad(
        ys,
        (dst) => {
          const wRows = scratch(be, R);
          be.gatherRows(weights.view, perm.pairOfRow.view, wRows.view, R, 1);
          be.binary("mul", gRows.view, [R, H], wRows.view, [R, 1], dst);
          wRows.free();
        },
        false,
      );
    }
    if (needW) {
      accumulateGrad(
        weights,
        (dst, acc) => {
          const prod = scratch(be, R * H);
          be.binary("mul", gRows.view, [R, H], ys.view, [R, H], prod.view);
          const dwRow = scratch(be, R);
          be.reduce("sum", prod.view, dwRow.view, R, H, 1);
          prod.free();
          if (acc) {
            const tmp = scratch(be, T * k);
            be.gatherRows(dwRow.view, perm.rowOfPair.view, tmp.view, T * k, 1);
            be.axpy(1, tmp.view, dst, T * k);
            tmp.free();
          } else {
            be.gatherRows(dwRow.view, perm.rowOfPair.view, dst, T * k, 1);
          }
          dwRow.free();
        },
        true,
      );
    }
    gRows.free();
  });
}
