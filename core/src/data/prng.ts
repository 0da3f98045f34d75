/**
 * A small seeded PRNG for data order: xoshiro128** (Blackman & Vigna, "Scrambled linear
 * pseudorandom number generators", 2018; period 2^128 − 1), seeded through SplitMix32 so that
 * nearby seeds give unrelated streams. 32-bit integer arithmetic only (Math.imul, >>> 0), so the
 * sequence is identical on every platform and in every JS engine.
 */

/** One SplitMix32 step: returns [output, next state]. Used to expand seeds. */
function splitmix32(state: number): [number, number] {
  const s = (state + 0x9e3779b9) >>> 0;
  let z = s;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
  return [(z ^ (z >>> 16)) >>> 0, s];
}

/** Hashes a list of 32-bit integers (e.g. `[seed, epoch]`) into one 32-bit seed. */
export function mixSeed(...parts: number[]): number {
  let h = 0x6a09e667;
  for (const p of parts) {
    if (!Number.isInteger(p)) throw new RangeError(`mixSeed: expected integers, got ${p}`);
    [h] = splitmix32((h ^ (p >>> 0)) >>> 0);
    [h] = splitmix32((h + Math.floor(p / 2 ** 32)) >>> 0);
  }
  return h;
}

/** xoshiro128** generator. Deterministic for a given seed. */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /** @param seed any integer (taken mod 2^32 after mixing). */
  constructor(seed: number) {
    let st = mixSeed(seed);
    [this.s0, st] = splitmix32(st);
    [this.s1, st] = splitmix32(st);
    [this.s2, st] = splitmix32(st);
    [this.s3] = splitmix32(st);
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1; // all-zero state is a fixed point
  }

  /** A generator with an explicit xoshiro128** state (four u32, not all zero); for tests against
   * the reference implementation. */
  static fromState(state: readonly [number, number, number, number]): Rng {
    if (state.every((x) => x >>> 0 === 0)) throw new RangeError("Rng.fromState: the all-zero state is invalid");
    const r = new Rng(0);
    [r.s0, r.s1, r.s2, r.s3] = state.map((x) => x >>> 0) as [number, number, number, number];
    return r;
  }

  /** Next uniform integer in [0, 2^32). */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (this.s1 << 9) >>> 0;
    this.s2 = (this.s2 ^ this.s0) >>> 0;
    this.s3 = (this.s3 ^ this.s1) >>> 0;
    this.s1 = (this.s1 ^ this.s2) >>> 0;
    this.s0 = (this.s0 ^ this.s3) >>> 0;
    this.s2 = (this.s2 ^ t) >>> 0;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform float in [0, 1) with 32 random bits. */
  nextFloat(): number {
    return this.nextU32() / 2 ** 32;
  }

  /** Uniform integer in [0, n), unbiased (rejection sampling). n must be in [1, 2^32]. */
  nextInt(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > 2 ** 32) throw new RangeError(`Rng.nextInt: n must be an integer in [1, 2^32], got ${n}`);
    const limit = 2 ** 32 - (2 ** 32 % n); // largest multiple of n ≤ 2^32
    for (;;) {
      const x = this.nextU32();
      if (x < limit) return x % n;
    }
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** Fisher–Yates shuffle of `a` in place (Knuth, TAOCP vol. 2, Algorithm P). Returns `a`. */
export function shuffleInPlace<T extends { length: number; [i: number]: unknown }>(a: T, rng: Rng): T {
  for (let i = a.length - 1; i > 0; i--) {
    const j = rng.nextInt(i + 1);
    const t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
  return a;
}

/** A uniformly random permutation of 0..n−1 (Int32Array). */
export function permutation(n: number, rng: Rng): Int32Array {
  const p = new Int32Array(n);
  for (let i = 0; i < n; i++) p[i] = i;
  return shuffleInPlace(p, rng);
}
