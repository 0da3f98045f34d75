/**
 * Routing statistics that see pairs (host side, from the routing indices the router produces):
 *
 * - co-occurrence: C[a·E + b] = how many tokens chose both experts a and b (a ≠ b) among their
 *   top-k (pre-drop), symmetric, zero diagonal; a token with k distinct experts adds 1 to each of
 *   its k·(k−1) ordered pairs. Σ_{a<b} C = T·k·(k−1)/2 for T tokens.
 * - traffic of the dispatch all_to_all, as a P×P matrix of the EP group (P = ep_size): row s is what
 *   EP rank s (the tokens' source) sends to each EP rank d:
 *   · `rows[s·P + d]`: (token, slot) rows — what ZeroMoE's dispatcher sends today (exchange.ts: one
 *     row per kept pair, so a token whose two experts share a rank is sent twice);
 *   · `tokens[s·P + d]`: distinct tokens — what a dispatcher that sends a token once per destination
 *     rank sends (DeepSpeed-style deduplicated dispatch). Placement changes this count: experts
 *     chosen together on one rank cost one copy, not two. Multiply by hidden × element bytes for
 *     bytes.
 *   The diagonal (s = d) stays on the rank; everything else crosses ranks.
 *
 * Indices are the router's [T·k] choice (Int32, expert index per (token, slot); −1 = dropped, which
 * co-occurrence ignores and traffic does not count).
 */

/** Add one forward's co-occurrence counts to `out` (E×E, row-major). `indices` [T·k].
 * @throws when an index is outside [−1, E). */
export function addPairCounts(indices: ArrayLike<number>, T: number, k: number, E: number, out: Float64Array): void {
  for (let t = 0; t < T; t++) {
    for (let i = 0; i < k; i++) {
      const a = indices[t * k + i]!;
      if (a < -1 || a >= E) throw new Error(`co-occurrence: expert index ${a} outside [0, ${E}) at token ${t}`);
      if (a < 0) continue;
      for (let j = i + 1; j < k; j++) {
        const b = indices[t * k + j]!;
        if (b < 0 || b === a) continue;
        out[a * E + b]! += 1;
        out[b * E + a]! += 1;
      }
    }
  }
}

/** Add one forward's dispatch traffic from EP rank `src` to `rows` and `tokens` (P×P, row-major;
 * see the module comment). `owner[e]` = EP rank holding expert e. */
export function addTraffic(indices: ArrayLike<number>, T: number, k: number, owner: ArrayLike<number>, src: number, P: number, rows: Float64Array, tokens: Float64Array): void {
  const seen = new Int32Array(P).fill(-1);
  for (let t = 0; t < T; t++) {
    for (let i = 0; i < k; i++) {
      const e = indices[t * k + i]!;
      if (e < 0) continue;
      const d = owner[e]!;
      rows[src * P + d]! += 1;
      if (seen[d] !== t) {
        seen[d] = t;
        tokens[src * P + d]! += 1;
      }
    }
  }
}

/** Off-diagonal sum of a P×P matrix (what crosses ranks). */
export function crossRank(m: ArrayLike<number>, P: number): number {
  let s = 0;
  for (let a = 0; a < P; a++) for (let b = 0; b < P; b++) if (a !== b) s += m[a * P + b]!;
  return s;
}

/** Sum of the entries of a P×P matrix whose source and destination ranks are in different groups
 * (`groupOf[r]` = group of EP rank r). */
export function crossGroup(m: ArrayLike<number>, groupOf: ArrayLike<number>): number {
  const P = groupOf.length;
  let s = 0;
  for (let a = 0; a < P; a++) for (let b = 0; b < P; b++) if (groupOf[a] !== groupOf[b]) s += m[a * P + b]!;
  return s;
}
