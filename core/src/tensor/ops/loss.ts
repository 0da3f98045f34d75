/**
 * Fused cross-entropy: mean over non-ignored rows of logsumexp(logits_r) − logits_r[t_r]
 * (PyTorch `F.cross_entropy(..., ignore_index, reduction="mean")`). The backend computes the
 * per-row losses and the gradient (softmax − onehot)/n_valid in one pass; the gradient is kept until
 * backward, where it is scaled by the incoming scalar gradient.
 */
import { accumulateGrad, isGradEnabled, record } from "../tape.ts";
import { Tensor, empty } from "../tensor.ts";

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
  const out = empty(be, [1]);
  if (rows > 0) {
    const total = empty(be, [1]);
    be.reduce("sum", losses.view, total.view, 1, rows, 1);
    be.affine(total.view, out.view, 1, scale, 0);
    total.dispose();
  }
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
