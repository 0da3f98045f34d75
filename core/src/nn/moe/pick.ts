/**
 * `takeAlongRows`: the router's chosen probabilities with the choice on the device (torch
 * `probs.gather(-1, idx)`): out[t, s] = x[t, idx[t, s]], differentiable in x. Backward adds g[t, s]
 * into dx[t, idx[t, s]], s ascending (Backend.scatterAddAlongRows) — the same single addition per
 * element as the host path's gather by flat index t·E + e and its scatter-add (router.ts
 * `chosenProbs`), so results are bit-identical on the cpu backend.
 */
import { gradTarget, record } from "../../tensor/index.ts";
import { empty, type Tensor } from "../../tensor/tensor.ts";

/** x f32 [T, E], idx i32 (T·k elements, entries in [0, E); others give 0) → [T, k].
 * @throws when idx does not hold T·k indices or x is not f32 [T, E]. */
export function takeAlongRows(x: Tensor, idx: Tensor, k: number): Tensor {
  if (x.ndim !== 2 || x.dtype !== "f32") throw new Error(`takeAlongRows: x must be f32 [rows, cols], got ${x}`);
  const [T, E] = x.shape as [number, number];
  if (idx.dtype !== "i32" || idx.numel !== T * k) throw new Error(`takeAlongRows: idx must be i32 with ${T} × ${k} entries, got ${idx}`);
  const be = x.be;
  const out = empty(be, [T, k]);
  if (T * k > 0) be.gatherAlongRows(x.view, idx.view, out.view, T, E, k);
  return record("takeAlongRows", [x], out, (g) => {
    if (T * k === 0) return;
    const t = gradTarget(x, "add");
    if (!t) return;
    be.scatterAddAlongRows(g.view, idx.view, t.view, T, E, k);
    t.commit();
  });
}
