/**
 * Float64 reference for row-wise ops: softmax, log-softmax, RMSNorm, LayerNorm, forward and backward.
 * Backwards are computed by contracting dy with the explicit Jacobian dy_j/dx_k (O(cols²) per
 * row), a different route from the closed forms the backends use.
 */

/** softmax (or log-softmax) of each row; computed as exp(x − max)/Σ. */
export function refSoftmax(x: ArrayLike<number>, rows: number, cols: number, log: boolean): Float64Array {
  const y = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const row = Array.from({ length: cols }, (_, j) => x[r * cols + j]!);
    const m = Math.max(...row);
    const e = row.map((v) => Math.exp(v - m));
    const s = e.reduce((a, b) => a + b, 0);
    for (let j = 0; j < cols; j++) y[r * cols + j] = log ? row[j]! - m - Math.log(s) : e[j]! / s;
  }
  return y;
}

/** dx_k = Σ_j dy_j ∂y_j/∂x_k with softmax Jacobian p_j(δ_jk − p_k) (log: δ_jk − p_k). x is the input. */
export function refSoftmaxBackward(x: ArrayLike<number>, dy: ArrayLike<number>, rows: number, cols: number, log: boolean): Float64Array {
  const p = refSoftmax(x, rows, cols, false);
  const dx = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let k = 0; k < cols; k++) {
      let s = 0;
      for (let j = 0; j < cols; j++) {
        const pj = p[r * cols + j]!;
        const pk = p[r * cols + k]!;
        const jac = log ? (j === k ? 1 : 0) - pk : pj * ((j === k ? 1 : 0) - pk);
        s += dy[r * cols + j]! * jac;
      }
      dx[r * cols + k] = s;
    }
  }
  return dx;
}

/** RMSNorm forward: y, rstd. */
export function refRmsnorm(x: ArrayLike<number>, w: ArrayLike<number>, rows: number, cols: number, eps: number): { y: Float64Array; rstd: Float64Array } {
  const y = new Float64Array(rows * cols);
  const rstd = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let ms = 0;
    for (let j = 0; j < cols; j++) ms += x[r * cols + j]! ** 2;
    ms /= cols;
    const rs = 1 / Math.sqrt(ms + eps);
    rstd[r] = rs;
    for (let j = 0; j < cols; j++) y[r * cols + j] = w[j]! * x[r * cols + j]! * rs;
  }
  return { y, rstd };
}

/** RMSNorm backward by the Jacobian: ∂y_j/∂x_k = w_j (δ_jk r − x_j x_k r³ / cols); dw_j = Σ_r dy_j x_j r. */
export function refRmsnormBackward(x: ArrayLike<number>, w: ArrayLike<number>, dy: ArrayLike<number>, rows: number, cols: number, eps: number): { dx: Float64Array; dw: Float64Array } {
  const { rstd } = refRmsnorm(x, w, rows, cols, eps);
  const dx = new Float64Array(rows * cols);
  const dw = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    const rs = rstd[r]!;
    for (let k = 0; k < cols; k++) {
      let s = 0;
      for (let j = 0; j < cols; j++) {
        const jac = w[j]! * ((j === k ? rs : 0) - (x[r * cols + j]! * x[r * cols + k]! * rs ** 3) / cols);
        s += dy[r * cols + j]! * jac;
      }
      dx[r * cols + k] = s;
    }
    for (let j = 0; j < cols; j++) dw[j] += dy[r * cols + j]! * x[r * cols + j]! * rs;
  }
  return { dx, dw };
}

/** LayerNorm forward (population variance): y, mean, rstd. */
export function refLayernorm(x: ArrayLike<number>, w: ArrayLike<number>, b: ArrayLike<number>, rows: number, cols: number, eps: number): { y: Float64Array; mean: Float64Array; rstd: Float64Array } {
  const y = new Float64Array(rows * cols);
  const mean = new Float64Array(rows);
  const rstd = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let mu = 0;
    for (let j = 0; j < cols; j++) mu += x[r * cols + j]!;
    mu /= cols;
    let v = 0;
    for (let j = 0; j < cols; j++) v += (x[r * cols + j]! - mu) ** 2;
    v /= cols;
    const rs = 1 / Math.sqrt(v + eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (let j = 0; j < cols; j++) y[r * cols + j] = (x[r * cols + j]! - mu) * rs * w[j]! + b[j]!;
  }
  return { y, mean, rstd };
}

/** LayerNorm backward by the Jacobian ∂y_j/∂x_k = w_j[(δ_jk − 1/n) r − (x_j − μ)(x_k − μ) r³ / n];
 * dw_j = Σ_r dy_j x̂_j; db_j = Σ_r dy_j. */
export function refLayernormBackward(x: ArrayLike<number>, w: ArrayLike<number>, b: ArrayLike<number>, dy: ArrayLike<number>, rows: number, cols: number, eps: number): { dx: Float64Array; dw: Float64Array; db: Float64Array } {
  const { mean, rstd } = refLayernorm(x, w, b, rows, cols, eps);
  const dx = new Float64Array(rows * cols);
  const dw = new Float64Array(cols);
  const db = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    const mu = mean[r]!;
    const rs = rstd[r]!;
    for (let k = 0; k < cols; k++) {
      let s = 0;
      for (let j = 0; j < cols; j++) {
        const jac = w[j]! * (((j === k ? 1 : 0) - 1 / cols) * rs - ((x[r * cols + j]! - mu) * (x[r * cols + k]! - mu) * rs ** 3) / cols);
        s += dy[r * cols + j]! * jac;
      }
      dx[r * cols + k] = s;
    }
    for (let j = 0; j < cols; j++) {
      dw[j] += dy[r * cols + j]! * (x[r * cols + j]! - mu) * rs;
      db[j] += dy[r * cols + j]!;
    }
  }
  return { dx, dw, db };
}
