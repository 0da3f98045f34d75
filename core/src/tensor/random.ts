/**
 * Deterministic counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel
 * random numbers: as easy as 1, 2, 3", SC'11 — the generator behind cuRAND/JAX/PyTorch's CUDA RNG).
 *
 * Counter-based means element i of a stream is a pure function of (key, i): any rank can generate
 * any slice of a parameter's initial values without generating the rest, and results are identical
 * across runs, ranks and partitionings. A stream's key is derived from a seed and a name (e.g. the
 * parameter's Hugging Face name) with {@link streamKey}.
 */

import { philox4x32, philoxBlocksInto } from "@zeromoe/kernels";

export { philox4x32 };

/** A 64-bit stream key [k0, k1] from a seed (integer) and a name, via FNV-1a over the name's UTF-16
 * code units mixed with the seed (then one Philox round-trip for diffusion). */
export function streamKey(seed: number, name: string): [number, number] {
  let h0 = 0x811c9dc5 ^ (seed >>> 0);
  let h1 = 0x01000193 ^ Math.floor(seed / 4294967296);
  for (let i = 0; i < name.length; i++) {
    h0 = Math.imul(h0 ^ name.charCodeAt(i), 0x01000193) >>> 0;
    h1 = Math.imul(h1 ^ name.charCodeAt(i), 0x5bd1e995) >>> 0;
  }
  const o = new Uint32Array(4);
  philox4x32(h0, h1, name.length, 0x5eed, seed >>> 0, 0x243f6a88, o);
  return [o[0]!, o[1]!];
}

/** Philox blocks generated per call of the wasm generator (two words each for normals, four for
 * uniforms: at most one 64 KiB page). */
const CHUNK_BLOCKS = 4096;
const TWO_PI = 2 * Math.PI;


/**
 * Fill `out` with N(mean, std²) samples for elements [start, start + out.length) of the stream
 * `key` (start an integer < 2^53). Element i uses Philox counter ⌊i/2⌋ (words c0, c1; c2 = c3 = 0)
 * and a Box–Muller pair (Box & Muller 1958) from its outputs x0, x1: u1 = (x0+1)/2^32,
 * u2 = (x1+1)/2^32 (never 0), r = √(−2 ln u1), θ = 2π·u2; even i takes mean + std·(r cos θ), odd i
 * mean + std·(r sin θ), evaluated in f64 (a Float32Array rounds once, to nearest). Any slice gives
 * the values of the whole stream at those positions (counter-based).
 */
export function normalFill(out: Float32Array | Float64Array, key: [number, number], start: number, std: number, mean = 0): void {
  const n = out.length;
  if (n === 0) return;
  const scratch = new Uint32Array(2 * CHUNK_BLOCKS);
  let c = Math.floor(start / 2);
  let j = 0;
  if (start % 2 === 1) {
    // the first element is the sine half of its block
    const blk = philoxBlocksInto(key, c, 0, 1, 2, scratch);
    const r = Math.sqrt(-2 * Math.log((blk[0]! + 1) / 4294967296));
    out[0] = mean + std * (r * Math.sin(TWO_PI * ((blk[1]! + 1) / 4294967296)));
    c++;
    j = 1;
  }
  while (j < n) {
    const pairs = Math.min(CHUNK_BLOCKS, Math.ceil((n - j) / 2));
    const blk = philoxBlocksInto(key, c, 0, pairs, 2, scratch);
    const full = Math.min(pairs, (n - j) >> 1); // pairs whose both halves are inside `out`
    for (let p = 0; p < full; p++, j += 2) {
      const r = Math.sqrt(-2 * Math.log((blk[2 * p]! + 1) / 4294967296));
      const th = TWO_PI * ((blk[2 * p + 1]! + 1) / 4294967296);
      out[j] = mean + std * (r * Math.cos(th));
      out[j + 1] = mean + std * (r * Math.sin(th));
    }
    if (full < pairs) {
      // a last element that is the cosine half of its block
      const r = Math.sqrt(-2 * Math.log((blk[2 * full]! + 1) / 4294967296));
      out[j] = mean + std * (r * Math.cos(TWO_PI * ((blk[2 * full + 1]! + 1) / 4294967296)));
      j++;
    }
    c += pairs;
  }
}

/** Fill `out` with uniform samples lo + (hi − lo)·(x/2^32) in [lo, hi) for elements [start, …) of the
 * stream `key`: element i is output word i mod 4 of Philox counter ⌊i/4⌋ (c2 = 1, c3 = 0). */
export function uniformFill(out: Float32Array | Float64Array, key: [number, number], start: number, lo = 0, hi = 1): void {
  const n = out.length;
  if (n === 0) return;
  const scratch = new Uint32Array(4 * (CHUNK_BLOCKS >> 1));
  const c0 = Math.floor(start / 4);
  const skip = start - 4 * c0; // words of the first block before `start`
  const span = hi - lo;
  let c = c0;
  let j = 0;
  while (j < n) {
    const first = c === c0 ? skip : 0;
    const nb = Math.min(CHUNK_BLOCKS >> 1, Math.ceil((n - j + first) / 4));
    const blk = philoxBlocksInto(key, c, 1, nb, 4, scratch);
    const end = Math.min(4 * nb, n - j + first);
    for (let w = first; w < end; w++, j++) out[j] = lo + span * (blk[w]! / 4294967296);
    c += nb;
  }
}

/** Uniform integers in [0, n) for elements [start, …) of the stream (for test data and sampling). */
export function randint(count: number, n: number, key: [number, number], start = 0): Int32Array {
  const u = new Float64Array(count);
  uniformFill(u, key, start);
  const out = new Int32Array(count);
  for (let i = 0; i < count; i++) out[i] = Math.min(n - 1, Math.floor(u[i]! * n));
  return out;
}
