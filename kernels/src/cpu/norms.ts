/**
 * RMSNorm (Zhang & Sennrich 2019) and LayerNorm (Ba et al. 2016) forward/backward on the cpu
 * backend. Row statistics in float64, two-pass mean/variance for LayerNorm (population variance,
 * as torch.nn.LayerNorm), columns in ascending order.
 */

import type { FArr } from "./store.ts";

/** y = x · rstd · w with rstd = 1/√(mean(x²) + eps) per row; rstd saved (rows). */
export function rmsnormF(x: FArr, xo: number, w: FArr, wo: number, y: FArr, yo: number, rstd: FArr, ro: number, rows: number, cols: number, eps: number): void {
  for (let r = 0; r < rows; r++) {
    const p = xo + r * cols;
    let ss = 0;
    for (let j = 0; j < cols; j++) ss += x[p + j]! * x[p + j]!;
    const rs = 1 / Math.sqrt(ss / cols + eps);
    rstd[ro + r] = rs;
    const q = yo + r * cols;
    for (let j = 0; j < cols; j++) y[q + j] = x[p + j]! * rs * w[wo + j]!;
  }
}

/** dx_j = rstd·w_j·dy_j − x_j · rstd³/cols · Σ_k w_k dy_k x_k; dw_j += Σ_rows dy_j x_j rstd.
 * The saved rstd is used as stored. dw accumulates in row order. */
export function rmsnormBackwardF(x: FArr, xo: number, w: FArr, wo: number, rstd: FArr, ro: number, dy: FArr, dyo: number, dx: FArr, dxo: number, dw: FArr, dwo: number, rows: number, cols: number): void {
  const dwAcc = new Float64Array(cols);
  for (let j = 0; j < cols; j++) dwAcc[j] = dw[dwo + j]!;
  for (let r = 0; r < rows; r++) {
    const p = xo + r * cols;
    const g = dyo + r * cols;
    const rs = rstd[ro + r]!;
    let dot = 0;
    for (let j = 0; j < cols; j++) dot += w[wo + j]! * dy[g + j]! * x[p + j]!;
    const c = (rs * rs * rs * dot) / cols;
    const q = dxo + r * cols;
    for (let j = 0; j < cols; j++) {
      dx[q + j] = rs * w[wo + j]! * dy[g + j]! - x[p + j]! * c;
      dwAcc[j] = dwAcc[j]! + dy[g + j]! * x[p + j]! * rs;
    }
  }
  for (let j = 0; j < cols; j++) dw[dwo + j] = dwAcc[j]!;
}

/** y = (x − mean)·rstd·w + b, rstd = 1/√(var + eps), var the population variance; saves mean, rstd. */
export function layernormF(x: FArr, xo: number, w: FArr, wo: number, b: FArr, bo: number, y: FArr, yo: number, mean: FArr, mo: number, rstd: FArr, ro: number, rows: number, cols: number, eps: number): void {
  for (let r = 0; r < rows; r++) {
    const p = xo + r * cols;
    let s = 0;
    for (let j = 0; j < cols; j++) s += x[p + j]!;
    const mu = s / cols;
    let v = 0;
    for (let j = 0; j < cols; j++) {
      const d = x[p + j]! - mu;
      v += d * d;
    }
    const rs = 1 / Math.sqrt(v / cols + eps);
    mean[mo + r] = mu;
    rstd[ro + r] = rs;
    const q = yo + r * cols;
    for (let j = 0; j < cols; j++) y[q + j] = (x[p + j]! - mu) * rs * w[wo + j]! + b[bo + j]!;
  }
}

/** With x̂ = (x − mean)·rstd and g = dy ⊙ w: dx = rstd·(g − mean(g) − x̂·mean(g ⊙ x̂));
 * dw += Σ_rows dy ⊙ x̂; db += Σ_rows dy. Saved mean and rstd are used as stored. */
export function layernormBackwardF(x: FArr, xo: number, w: FArr, wo: number, mean: FArr, mo: number, rstd: FArr, ro: number, dy: FArr, dyo: number, dx: FArr, dxo: number, dw: FArr, dwo: number, db: FArr, dbo: number, rows: number, cols: number): void {
  const dwAcc = new Float64Array(cols);
  const dbAcc = new Float64Array(cols);
  for (let j = 0; j < cols; j++) {
    dwAcc[j] = dw[dwo + j]!;
    dbAcc[j] = db[dbo + j]!;
  }
  for (let r = 0; r < rows; r++) {
    const p = xo + r * cols;
    const gq = dyo + r * cols;
    const mu = mean[mo + r]!;
    const rs = rstd[ro + r]!;
    let sg = 0;
    let sgx = 0;
    for (let j = 0; j < cols; j++) {
      const xh = (x[p + j]! - mu) * rs;
      const g = dy[gq + j]! * w[wo + j]!;
      sg += g;
      sgx += g * xh;
      dwAcc[j] = dwAcc[j]! + dy[gq + j]! * xh;
      dbAcc[j] = dbAcc[j]! + dy[gq + j]!;
    }
    const mg = sg / cols;
    const mgx = sgx / cols;
    const q = dxo + r * cols;
    for (let j = 0; j < cols; j++) {
      const xh = (x[p + j]! - mu) * rs;
      dx[q + j] = rs * (dy[gq + j]! * w[wo + j]! - mg - xh * mgx);
    }
  }
  for (let j = 0; j < cols; j++) {
    dw[dwo + j] = dwAcc[j]!;
    db[dbo + j] = dbAcc[j]!;
  }
}
