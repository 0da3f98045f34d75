/**
 * Normalisations over the last axis, computed in f32:
 * - RMSNorm (Zhang & Sennrich 2019; Hugging Face `LlamaRMSNorm`): y = x / sqrt(mean(x²) + eps) · w.
 * - LayerNorm (Ba et al. 2016): y = (x − mean) / sqrt(var + eps) · w + b (biased variance).
 * Per-row statistics are saved for backward; weight/bias gradients are accumulated over rows.
 */
import type { View } from "@zeromoe/kernels";
import { gradTarget, record, scratch } from "../tape.ts";
import { Tensor, empty } from "../tensor.ts";

function checkNormArgs(op: string, x: Tensor, ...ps: Tensor[]): void {
  if (x.dtype !== "f32") throw new Error(`${op}: f32 input expected, got ${x}`);
  for (const p of ps) {
    if (p.ndim !== 1 || p.shape[0] !== x.cols) throw new Error(`${op}: parameter ${p} must have shape [${x.cols}] to match input ${x}`);
  }
}

/** Resolve a grad target, or a scratch buffer that is discarded when no gradient is wanted. */
function targetOrScratch(t: Tensor, mode: "add" | "overwrite"): { view: View; done(): void } {
  const g = gradTarget(t, mode);
  if (g) return { view: g.view, done: () => g.commit() };
  const s = scratch(t.be, t.numel);
  if (mode === "add") t.be.fill(s.view, 0, Math.max(t.numel, 1));
  return { view: s.view, done: () => s.free() };
}

/** RMSNorm over the last axis: x [..., C], w [C] → y [..., C]. */
export function rmsnorm(x: Tensor, w: Tensor, eps: number): Tensor {
  checkNormArgs("rmsnorm", x, w);
  const be = x.be;
  const rows = x.rows;
  const cols = x.cols;
  const out = empty(be, x.shape);
  const rstd = empty(be, [Math.max(rows, 1)]);
  if (rows > 0) be.rmsnorm(x.view, w.view, out.view, rstd.view, rows, cols, eps);
  return record("rmsnorm", [x, w], out, (g) => {
    if (rows === 0) return;
    const dx = targetOrScratch(x, "overwrite");
    const dw = targetOrScratch(w, "add");
    be.rmsnormBackward(x.view, w.view, rstd.view, g.view, dx.view, dw.view, rows, cols);
    dx.done();
    dw.done();
    rstd.dispose();
  });
}

/** LayerNorm over the last axis: x [..., C], w [C], b [C] → y [..., C]. */
export function layernorm(x: Tensor, w: Tensor, b: Tensor, eps: number): Tensor {
  checkNormArgs("layernorm", x, w, b);
  const be = x.be;
  const rows = x.rows;
  const cols = x.cols;
  const out = empty(be, x.shape);
  const mean = empty(be, [Math.max(rows, 1)]);
  const rstd = empty(be, [Math.max(rows, 1)]);
  if (rows > 0) be.layernorm(x.view, w.view, b.view, out.view, mean.view, rstd.view, rows, cols, eps);
  return record("layernorm", [x, w, b], out, (g) => {
    if (rows === 0) return;
    const dx = targetOrScratch(x, "overwrite");
    const dw = targetOrScratch(w, "add");
    const db = targetOrScratch(b, "add");
    be.layernormBackward(x.view, w.view, mean.view, rstd.view, g.view, dx.view, dw.view, db.view, rows, cols);
    dx.done();
    dw.done();
    db.done();
    mean.dispose();
    rstd.dispose();
  });
}
