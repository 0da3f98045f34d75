/**
 * Numpy broadcasting helpers: the broadcast shape of two shapes, and the reduction of a gradient
 * of the broadcast shape back to an operand's shape (summing over broadcast axes), done with the
 * backend's `reduce` op over merged runs of axes.
 */
import type { Backend, View } from "@zeromoe/kernels";
import { fmtShape, numelOf } from "./tensor.ts";

/** Broadcast shape of `a` and `b` (right-aligned, numpy rules).
 * @throws naming both shapes if a dimension pair is neither equal nor 1. */
export function broadcastShape(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  const out: number[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const da = a[a.length - n + i] ?? 1;
    const db = b[b.length - n + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) throw new Error(`shapes ${fmtShape(a)} and ${fmtShape(b)} do not broadcast (axis ${i}: ${da} vs ${db})`);
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/**
 * Sum `g` (shape `full`) over the axes where `target` (right-aligned, shorter or with 1s) was
 * broadcast, writing numel(target) elements to `dst`. `accumulate` adds into `dst` instead.
 * Uses temporaries when more than one reduction is needed.
 */
export function reduceToShape(be: Backend, g: View, full: readonly number[], target: readonly number[], dst: View, accumulate: boolean): void {
  const n = full.length;
  const padded = Array.from({ length: n }, (_, i) => target[target.length - n + i] ?? 1);
  // Runs of consecutive axes to reduce (target 1, full > 1).
  const cur = [...full];
  const runs: [number, number][] = [];
  for (let i = 0; i < n; ) {
    if (padded[i] === 1 && full[i]! > 1) {
      let j = i;
      while (j < n && padded[j] === 1 && full[j]! > 1) j++;
      runs.push([i, j]);
      i = j;
    } else i++;
  }
  const total = numelOf(target);
  if (runs.length === 0) {
    if (accumulate) be.axpy(1, g, dst, total);
    else be.copy(g, dst, total);
    return;
  }
  let src = g;
  let tmpPrev: ReturnType<Backend["alloc"]> | null = null;
  for (let r = 0; r < runs.length; r++) {
    const [s, e] = runs[r]!;
    const outer = numelOf(cur.slice(0, s));
    const red = numelOf(cur.slice(s, e));
    const inner = numelOf(cur.slice(e));
    for (let k = s; k < e; k++) cur[k] = 1;
    const last = r === runs.length - 1;
    if (last && !accumulate) {
      be.reduce("sum", src, dst, outer, red, inner);
    } else {
      const tmp = be.alloc("f32", Math.max(outer * inner, 1), "activation");
      be.reduce("sum", src, { buf: tmp, off: 0 }, outer, red, inner);
      if (tmpPrev) be.free(tmpPrev);
      tmpPrev = tmp;
      src = { buf: tmp, off: 0 };
      if (last) be.axpy(1, src, dst, total);
    }
  }
  if (tmpPrev) be.free(tmpPrev);
}
