/**
 * Expert capacity and token dropping (DeepSpeed `sharded_moe.py` `top1gating`/`top2gating`;
 * Switch Transformer, Fedus et al. 2021; GShard, Lepikhin et al. 2020).
 *
 * Capacity per expert for T tokens, E experts and k slots per token:
 *   C = max(min_capacity, ceil((T / E) · (capacity_factor · k)))
 * (DeepSpeed `_capacity(gates, capacity_factor, min_capacity)`, whose top-2 gate passes
 * `capacity_factor · 2`). It counts (token, slot) pairs and applies to the tokens of ONE rank's
 * micro-batch, as in DeepSpeed (each rank drops locally, before the all_to_all).
 *
 * Priority (which pairs are kept when an expert is over capacity): slot-major, then token order —
 * every token's first choice comes before any second choice (DeepSpeed: `locations2 =
 * cumsum(mask2) − 1 + sum(mask1)`; GShard Algorithm 1), and within a slot earlier tokens win. A
 * pair is kept iff fewer than C pairs for the same expert precede it in that order. No random
 * token selection (DeepSpeed `use_rts=False`). Dropped pairs are marked −1: they are not
 * dispatched and contribute nothing to the output (the token's residual path remains).
 */

/** The capacity C (see the module comment). @throws on non-positive sizes or a factor ≤ 0. */
export function expertCapacity(tokens: number, numExperts: number, k: number, capacityFactor: number, minCapacity: number): number {
  if (!(tokens >= 0) || !(numExperts >= 1) || !(k >= 1)) throw new Error(`moe capacity: need tokens ≥ 0, experts ≥ 1, k ≥ 1 (got ${tokens}, ${numExperts}, ${k})`);
  if (!(capacityFactor > 0)) throw new Error(`moe capacity: capacity_factor must be > 0, got ${capacityFactor}`);
  return Math.max(minCapacity, Math.ceil((tokens / numExperts) * (capacityFactor * k)));
}

/** Result of applying a capacity. */
export interface CapacityResult {
  /** The pairs [T·k] row-major with dropped ones set to −1 (a new array). */
  indices: Int32Array;
  /** Number of dropped pairs. */
  dropped: number;
  /** Pairs kept per expert [E]. */
  kept: Int32Array;
}

/**
 * Drop the pairs past `capacity` per expert in the priority order of the module comment.
 * `chosen` [T·k] row-major (token t, slot s at t·k + s). @throws on an expert outside [0, E).
 */
export function applyCapacity(chosen: Int32Array, T: number, k: number, numExperts: number, capacity: number): CapacityResult {
  if (chosen.length !== T * k) throw new Error(`moe capacity: ${chosen.length} choices, expected T·k = ${T * k}`);
  const out = Int32Array.from(chosen);
  const kept = new Int32Array(numExperts);
  let dropped = 0;
  for (let s = 0; s < k; s++) {
    for (let t = 0; t < T; t++) {
      const p = t * k + s;
      const e = chosen[p]!;
      if (e < 0 || e >= numExperts) throw new Error(`moe capacity: expert ${e} at token ${t} slot ${s} is outside [0, ${numExperts})`);
      if (kept[e]! < capacity) kept[e]!++;
      else {
        out[p] = -1;
        dropped++;
      }
    }
  }
  return { indices: out, dropped, kept };
}
