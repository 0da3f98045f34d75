/**
 * Fused cross-entropy: mean over non-ignored rows of logsumexp(logits_r) − logits_r[t_r]
 * (PyTorch `F.cross_entropy(..., ignore_index, reduction="mean")`). The backend computes the
 * per-row losses and the gradient (softmax − onehot)/n_valid in one pass; the gradient is kept until
 * backward, where it is scaled by the incoming scalar gradient.
 */
import { accumulateGrad, isGradEnabled, record } from "../tape.ts";
import { Tensor, empty, fromArray } from "../tensor.ts";
import { mul, scale, square, sub } from "./elementwise.ts";
import { mean, sum } from "./reduce.ts";
import { logSoftmax } from "./softmax.ts";

/**
 * The loss of a batch from its per-row losses: a new [1] tensor scale · Σ losses[0 … rows), summed
 * by one device reduce and scaled by one affine (so every loss that uses it rounds alike); 0 when
 * rows is 0. `losses` is f32 with at least `rows` elements and is not consumed.
 */
export function scaledLossTotal(losses: Tensor, rows: number, scale: number): Tensor {
  const be = losses.be;
  const out = empty(be, [1]);
  if (rows > 0) {
    const total = empty(be, [1]);
    be.reduce("sum", losses.view, total.view, 1, rows, 1);
    be.affine(total.view, out.view, 1, scale, 0);
    total.dispose();
  }
  return out;
}

/**
 * logits f32 [..., vocab], targets i32 with numel = rows of logits. `numValid` is the number of
 * targets ≠ `ignoreIndex` (the caller knows the labels on the host); the loss is the sum divided by
 * it (0 rows valid → loss 0). Returns a [1] tensor.
 * @throws on shape/dtype mismatches.
 */
export function crossEntropy(logits: Tensor, targets: Tensor, numValid: number, ignoreIndex = -100): Tensor {
  if (logits.dtype !== "f32") throw new Error(`crossEntropy: logits must be f32, got ${logits}`);
  if (targets.dtype !== "i32") throw new Error(`crossEntropy: targets must be i32, got ${targets}`);
  const rows = logits.rows;
  const vocab = logits.cols;
  if (targets.numel !== rows) throw new Error(`crossEntropy: ${targets} must have one target per logits row (${rows} rows in ${logits})`);
  const be = logits.be;
  const scale = numValid > 0 ? 1 / numValid : 0;
  const losses = empty(be, [Math.max(rows, 1)]);
  const wantGrad = isGradEnabled() && logits.requiresGrad;
  const dlogits = empty(be, wantGrad ? logits.shape : [Math.max(rows * vocab, 1)]);
  if (rows > 0) be.crossEntropy(logits.view, targets.view, losses.view, dlogits.view, rows, vocab, ignoreIndex, scale);
  const out = scaledLossTotal(losses, rows, scale);
  losses.dispose();
  if (!wantGrad) {
    dlogits.dispose();
    return out;
  }
  return record("crossEntropy", [logits], out, (g) => {
    // dlogits already holds (softmax − onehot)/numValid; multiply by the scalar upstream gradient.
    accumulateGrad(logits, (dst) => be.binary("mul", dlogits.view, [rows * vocab], g.view, [1], dst), false);
    dlogits.dispose();
  });
}

/**
 * PaLM's z-loss (Chowdhery et al. 2022, §5) of materialised logits [..., vocab]:
 * coef · Σ over scored rows of lse_r² / numValid, lse_r = logsumexp of row r, a row scored when
 * hostTargets[r] ≠ ignoreIndex. Composed of differentiable ops (lse_r = mean_j(x_rj −
 * logSoftmax(x)_rj), whose gradient is softmax_r), so it is the unfused counterpart of
 * linearCrossEntropy's `zLoss` (add it to {@link crossEntropy}). Returns a [1] tensor (0 when
 * numValid is 0). @throws when hostTargets does not have one entry per row.
 */
export function logitsZLoss(logits: Tensor, hostTargets: ArrayLike<number>, numValid: number, coef: number, ignoreIndex = -100): Tensor {
  const rows = logits.rows;
  if (hostTargets.length !== rows) throw new Error(`logitsZLoss: hostTargets has ${hostTargets.length} entries, expected one per row of ${logits}`);
  const mask = new Float32Array(rows);
  for (let r = 0; r < rows; r++) mask[r] = hostTargets[r] === ignoreIndex ? 0 : 1;
  const lse = mean(sub(logits, logSoftmax(logits)), -1);
  const zs = mul(square(lse), fromArray(logits.be, mask, lse.shape));
  return scale(sum(zs), numValid > 0 ? coef / numValid : 0);
}
