/**
 * Embedding lookup: out[i, :] = table[ids[i], :]. Backward scatters the gradient rows back into the
 * table (`embeddingBackward`, deterministic ascending order); ids receive no gradient.
 */
import { gradTarget, record } from "../tape.ts";
import { Tensor, empty } from "../tensor.ts";

/** ids i32 [...] , table f32 [vocab, dim] → out [..., dim]. Ids out of range give zero rows on the
 * device (validate on the host, e.g. with {@link checkIds}). */
export function embedding(table: Tensor, ids: Tensor): Tensor {
  if (table.ndim !== 2 || table.dtype !== "f32") throw new Error(`embedding: table must be f32 [vocab, dim], got ${table}`);
  if (ids.dtype !== "i32") throw new Error(`embedding: ids must be i32, got ${ids}`);
  const dim = table.shape[1]!;
  const n = ids.numel;
  const be = table.be;
  const out = empty(be, [...ids.shape, dim]);
  if (out.numel > 0) be.embedding(table.view, ids.view, out.view, n, dim);
  return record("embedding", [table], out, (g) => {
    const t = gradTarget(table, "add");
    if (!t || n === 0) return;
    be.embeddingBackward(g.view, ids.view, t.view, n, dim);
    t.commit();
  });
}

/** Throw if any id is outside [0, vocab) (ignoring `allow`, e.g. −100 for labels).
 * @throws naming the first bad position and value. */
export function checkIds(ids: ArrayLike<number>, vocab: number, what: string, allow?: number): void {
  for (let i = 0; i < ids.length; i++) {
    const v = ids[i]!;
    if (v === allow) continue;
    if (!Number.isInteger(v) || v < 0 || v >= vocab) throw new Error(`${what}[${i}] = ${v} is outside [0, ${vocab})`);
  }
}
