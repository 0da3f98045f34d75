/**
 * Residual add + RMSNorm fused on the cpu backend (the pre-norm decoder's `h2 = h + a;
 * n = rmsnorm(h2)·w`): forward writes both the sum and the normed rows; backward adds the sum's own
 * gradient to the norm's dx. Every value the unfused ops store (the sum, the norm's dx) is rounded to
 * the storage type here too, so results equal `binary add` + `rmsnorm` (and `rmsnormBackward` +
 * `axpy`) bit for bit.
 */
import { rmsnormBackwardF, rmsnormF } from "./norms.ts";
import type { FArr } from "./store.ts";

/** s = x + r (rows × cols), then y = s·rstd·w with rstd = 1/√(mean(s²) + eps) saved per row. */
export function addRmsnormF(x: FArr, xo: number, r: FArr, ro: number, w: FArr, wo: number, s: FArr, so: number, y: FArr, yo: number, rstd: FArr, rso: number, rows: number, cols: number, eps: number): void {
  const n = rows * cols;
  for (let i = 0; i < n; i++) s[so + i] = x[xo + i]! + r[ro + i]!;
  rmsnormF(s, so, w, wo, y, yo, rstd, rso, rows, cols, eps);
}

/**
 * dx = dSum + rmsnorm'(dy) (the norm's dx rounded to the storage type first, as `rmsnormBackward`
 * stores it), dw += Σ_rows dy·s·rstd; with `dSum` null, dx = rmsnorm'(dy). dx may be dSum itself
 * (in place).
 */
export function addRmsnormBackwardF(s: FArr, so: number, w: FArr, wo: number, rstd: FArr, rso: number, dy: FArr, dyo: number, dSum: FArr | null, dso: number, dx: FArr, dxo: number, dw: FArr, dwo: number, rows: number, cols: number): void {
  if (!dSum) {
    rmsnormBackwardF(s, so, w, wo, rstd, rso, dy, dyo, dx, dxo, dw, dwo, rows, cols);
    return;
  }
  const n = rows * cols;
  const tmp = dx instanceof Float32Array ? new Float32Array(n) : new Float64Array(n);
  rmsnormBackwardF(s, so, w, wo, rstd, rso, dy, dyo, tmp, 0, dw, dwo, rows, cols);
  for (let i = 0; i < n; i++) dx[dxo + i] = dSum[dso + i]! + tmp[i]!;
}
