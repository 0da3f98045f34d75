/**
 * Deterministic counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel
 * random numbers: as easy as 1, 2, 3", SC'11 — the generator behind cuRAND/JAX/PyTorch's CUDA RNG).
 *
 * Counter-based means element i of a stream is a pure function of (key, i): any rank can generate
 * any slice of a parameter's initial values without generating the rest, and results are identical
 * across runs, ranks and partitionings. A stream's key is derived from a seed and a name (e.g. the
 * parameter's Hugging Face name) with {@link streamKey}.
 */

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

/** High 32 bits of the 64-bit product of two uint32 (exact, using doubles on 16-bit halves). */
function mulhi(a: number, b: number): number {
  const bLo = b & 0xffff;
  const bHi = b >>> 16;
  const t1 = a * bLo; // < 2^48, exact
  const t2 = a * bHi; // < 2^48, exact
  const t2Hi = Math.floor(t2 / 65536);
  const t2Lo = t2 - t2Hi * 65536;
  return (t2Hi + Math.floor((t2Lo * 65536 + t1) / 4294967296)) >>> 0;
}

/** One Philox4x32-10 block: 4 uint32 outputs for counter (c0..c3) and key (k0, k1). */
export function philox4x32(c0: number, c1: number, c2: number, c3: number, k0: number, k1: number, out: Uint32Array): void {
  let x0 = c0 >>> 0, x1 = c1 >>> 0, x2 = c2 >>> 0, x3 = c3 >>> 0;
  let a = k0 >>> 0, b = k1 >>> 0;
  for (let r = 0; r < 10; r++) {
    const hi0 = mulhi(M0, x0);
    const lo0 = Math.imul(M0, x0) >>> 0;
    const hi1 = mulhi(M1, x2);
    const lo1 = Math.imul(M1, x2) >>> 0;
    const y0 = (hi1 ^ x1 ^ a) >>> 0;
    const y2 = (hi0 ^ x3 ^ b) >>> 0;
    x0 = y0;
    x1 = lo1;
    x2 = y2;
    x3 = lo0;
    a = (a + W0) >>> 0;
    b = (b + W1) >>> 0;
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}

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

/** uint32 → uniform in (0, 1] (never 0, so log() is safe). */
function toUnit(u: number): number {
  return (u + 1) / 4294967296;
}

/**
 * Fill `out` with N(mean, std²) samples for elements [start, start + out.length) of the stream
 * `key`. Element i uses Philox counter ⌊i/2⌋ and a Box–Muller pair (Box & Muller 1958): even i the
 * cosine branch, odd i the sine branch.
 */
export function normalFill(out: Float32Array | Float64Array, key: [number, number], start: number, std: number, mean = 0): void {
  const blk = new Uint32Array(4);
  let cached = -1;
  for (let j = 0; j < out.length; j++) {
    const i = start + j;
    const c = Math.floor(i / 2);
    if (c !== cached) {
      philox4x32(c >>> 0, Math.floor(c / 4294967296) >>> 0, 0, 0, key[0], key[1], blk);
      cached = c;
    }
    const u1 = toUnit(blk[0]!);
    const u2 = toUnit(blk[1]!);
    const r = Math.sqrt(-2 * Math.log(u1));
    const z = i % 2 === 0 ? r * Math.cos(2 * Math.PI * u2) : r * Math.sin(2 * Math.PI * u2);
    out[j] = mean + std * z;
  }
}

/** Fill `out` with uniform samples in [lo, hi) for elements [start, …) of the stream `key`
 * (one Philox block per 4 elements). */
export function uniformFill(out: Float32Array | Float64Array, key: [number, number], start: number, lo = 0, hi = 1): void {
  const blk = new Uint32Array(4);
  let cached = -1;
  for (let j = 0; j < out.length; j++) {
    const i = start + j;
    const c = Math.floor(i / 4);
    if (c !== cached) {
      philox4x32(c >>> 0, Math.floor(c / 4294967296) >>> 0, 1, 0, key[0], key[1], blk);
      cached = c;
    }
    out[j] = lo + (hi - lo) * (blk[i % 4]! / 4294967296);
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
