/**
 * Seeded xorshift32 random data for tests and benchmarks: one generator, so every test input and
 * bench operand in the repository is reproducible from a seed and bit-identical across runs and
 * machines.
 *
 * Algorithm: G. Marsaglia, "Xorshift RNGs", Journal of Statistical Software 8(14), 2003 — the
 * 32-bit generator with shift triple (13, 17, 5); period 2^32 − 1, state never 0.
 */

/**
 * A seeded xorshift32 stream of uniform u32 integers.
 *
 * @param seed any number; its low 32 bits (`seed >>> 0`) are the initial state, and a state of 0
 *   (which xorshift cannot leave) is replaced by 1. Callers wanting another zero-seed fallback pass
 *   `seed >>> 0 || fallback`.
 * @returns a function giving the next integer in [1, 2^32 − 1] on each call.
 */
export function xorshift32(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

/**
 * `n` float64 values uniform in [lo, hi): element i is `lo + (u_i / 2^32) · (hi − lo)` where u_i is
 * the i-th value of {@link xorshift32}(seed), computed in float64.
 *
 * @param n number of values (a non-negative integer).
 * @param seed see {@link xorshift32}.
 * @param lo lower bound, default −1. @param hi upper bound, default 1.
 * @returns a Float64Array of length n.
 */
export function randomF64(n: number, seed: number, lo = -1, hi = 1): Float64Array {
  const next = xorshift32(seed);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + (next() / 2 ** 32) * (hi - lo);
  return out;
}

/**
 * `n` f32 values uniform in [lo, hi): {@link randomF64}(n, seed, lo, hi) with each element rounded
 * to the nearest f32 (round-to-nearest-even, as a Float32Array store does).
 *
 * @returns a Float32Array of length n.
 */
export function randomF32(n: number, seed: number, lo = -1, hi = 1): Float32Array {
  return Float32Array.from(randomF64(n, seed, lo, hi));
}

/** Default block length of {@link tiledRandomF32}: a prime, so the repetition never lines up with
 * a matrix row. */
export const RANDOM_BLOCK = 1048573;

/**
 * `n` f32 values made of {@link randomF32}(min(block, n), seed) repeated (the last copy cut short):
 * benchmark operands of hundreds of millions of elements for the cost of one block of draws.
 *
 * @param n number of values (a non-negative integer).
 * @param seed see {@link xorshift32}.
 * @param block length of the repeated block, default {@link RANDOM_BLOCK} (a positive integer).
 * @returns a Float32Array of length n, values in [-1, 1).
 */
export function tiledRandomF32(n: number, seed: number, block = RANDOM_BLOCK): Float32Array {
  const b = randomF32(Math.min(block, n), seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += block) out.set(b.subarray(0, Math.min(block, n - i)), i);
  return out;
}
