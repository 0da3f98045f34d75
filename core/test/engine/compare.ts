/**
 * Comparisons of training results for the engine tests: exact equality of parameters and loss
 * curves, and the size of a difference (max/RMS absolute) where a tolerance is stated.
 */
import type { TrainOut } from "./fixtures.ts";

/** Size of the difference between two runs' parameters (same names and lengths expected). */
export interface ParamDiff {
  /** max |a − b| over all elements. */
  maxAbs: number;
  /** sqrt(mean (a − b)²) over all elements. */
  rms: number;
  /** Elements that differ at all. */
  differing: number;
  total: number;
}

/** Compare the parameters of `a` and `b`. @throws naming a parameter missing or of another length. */
export function paramDiff(a: TrainOut, b: TrainOut): ParamDiff {
  let maxAbs = 0;
  let sq = 0;
  let differing = 0;
  let total = 0;
  const names = Object.keys(a.params);
  if (names.length !== Object.keys(b.params).length) throw new Error(`paramDiff: ${names.length} vs ${Object.keys(b.params).length} parameters`);
  for (const k of names) {
    const x = a.params[k]!;
    const y = b.params[k];
    if (!y || y.length !== x.length) throw new Error(`paramDiff: parameter ${k} missing or of another length (${x.length} vs ${y?.length})`);
    for (let i = 0; i < x.length; i++) {
      const d = Math.abs(x[i]! - y[i]!);
      if (d !== 0 || Number.isNaN(d)) differing++;
      maxAbs = Math.max(maxAbs, Number.isNaN(d) ? Infinity : d);
      sq += d * d;
      total++;
    }
  }
  return { maxAbs, rms: Math.sqrt(sq / Math.max(1, total)), differing, total };
}

/** max |a − b| over two loss curves of equal length. */
export function lossDiff(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) throw new Error(`lossDiff: ${a.length} vs ${b.length} steps`);
  return a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);
}
