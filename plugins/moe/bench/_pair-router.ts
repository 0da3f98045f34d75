/**
 * A router skewed to fixed expert groups, for the placement benchmark and its test: E experts
 * form E/k fixed "teams" of k experts, scattered by a fixed shuffle of the expert indices (seed
 * `layoutSeed`, so neither the contiguous nor the round-robin layout happens to match them); each token's router logits favour one team (drawn with a
 * mild skew: team i with weight 1 + skew·i/(teams−1)) by +`bias`, plus Gaussian noise of std 1, and
 * the token takes its top-k by logit (ties to the lower expert). So most tokens choose a whole
 * team, a few stray. Deterministic for a seed.
 *
 * Tokens come from EP ranks round-robin over the micro-batch (token t from rank t mod P), as the
 * data-parallel ranks each route their own tokens.
 */
import { xorshift32 } from "@zeromoe/kernels/testing";

/** Uniform [0, 1) draws from the repository's one test generator (kernels/src/testing/random.ts
 * xorshift32), seeded by `seed`. */
export function prng(seed: number): () => number {
  const next = xorshift32(seed);
  return () => next() / 4294967296;
}

/** Options of {@link pairRouterIndices}. */
export interface PairRouterOptions {
  E: number;
  k: number;
  tokens: number;
  seed: number;
  /** Logit bonus of the favoured team (default 4). */
  bias?: number;
  /** Seed of the shuffle that scatters the teams over expert indices (default 99). */
  layoutSeed?: number;
  /** Team popularity skew (default 0.2: the last team is drawn 1.2× as often as the first). */
  skew?: number;
}

/** The router's top-k choice [tokens·k] (Int32, experts ascending by logit rank). */
export function pairRouterIndices(o: PairRouterOptions): Int32Array {
  const { E, k, tokens } = o;
  if (E % k !== 0) throw new Error(`pair router: E ${E} must be a multiple of k ${k}`);
  const teams = E / k;
  const bias = o.bias ?? 4;
  const skew = o.skew ?? 0.2;
  const lr = prng(o.layoutSeed ?? 99);
  const slotOf = Array.from({ length: E }, (_, i) => i);
  for (let i = E - 1; i > 0; i--) {
    const j = Math.floor(lr() * (i + 1));
    [slotOf[i], slotOf[j]] = [slotOf[j]!, slotOf[i]!];
  }
  const r = prng(o.seed);
  const w = Array.from({ length: teams }, (_, i) => 1 + (teams > 1 ? (skew * i) / (teams - 1) : 0));
  const wsum = w.reduce((a, b) => a + b, 0);
  const out = new Int32Array(tokens * k);
  const logit = new Float64Array(E);
  for (let t = 0; t < tokens; t++) {
    let u = r() * wsum;
    let team = 0;
    while (team < teams - 1 && u >= w[team]!) u -= w[team++]!;
    for (let e = 0; e < E; e++) {
      const g = Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
      logit[e] = g + (slotOf[e]! % teams === team ? bias : 0);
    }
    const order = Array.from({ length: E }, (_, e) => e).sort((a, b) => logit[b]! - logit[a]! || a - b);
    for (let s = 0; s < k; s++) out[t * k + s] = order[s]!;
  }
  return out;
}
