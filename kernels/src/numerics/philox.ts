/**
 * Philox4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11 —
 * the generator behind cuRAND/JAX/PyTorch's CUDA RNG): the counter-based block function, and blocks
 * for runs of consecutive counters (from the WebAssembly generator in ./philox-wasm.ts, or from the
 * JavaScript function where WebAssembly is missing; same bits).
 *
 * Counter layout used everywhere in this repository: a 64-bit counter c in words c0 (low 32 bits)
 * and c1 (high bits), a stream selector in c2 (0 for normal streams, 1 for uniform ones), c3 = 0,
 * and a 64-bit key (k0, k1). The WGSL twin is kernels/src/wgsl/random.ts.
 */
import { philoxBlocks } from "./philox-wasm.ts";

export { philoxBlocks, PHILOX_WASM_MAX_WORDS } from "./philox-wasm.ts";

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

/** High 32 bits of the 64-bit product of two uint32 (exact: the four 16×16-bit partial products
 * are below 2^32). */
export function mulhi32(a: number, b: number): number {
  const aL = a & 0xffff;
  const aH = a >>> 16;
  const bL = b & 0xffff;
  const bH = b >>> 16;
  const lh = aL * bH;
  const hl = aH * bL;
  const mid = ((aL * bL) >>> 16) + (lh & 0xffff) + (hl & 0xffff);
  return (aH * bH + (lh >>> 16) + (hl >>> 16) + (mid >>> 16)) >>> 0;
}

/** One Philox4x32-10 block: 4 uint32 outputs for counter (c0..c3) and key (k0, k1), into `out`. */
export function philox4x32(c0: number, c1: number, c2: number, c3: number, k0: number, k1: number, out: Uint32Array): void {
  let x0 = c0 >>> 0, x1 = c1 >>> 0, x2 = c2 >>> 0, x3 = c3 >>> 0;
  let a = k0 >>> 0, b = k1 >>> 0;
  for (let r = 0; r < 10; r++) {
    const hi0 = mulhi32(M0, x0);
    const lo0 = Math.imul(M0, x0) >>> 0;
    const hi1 = mulhi32(M1, x2);
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

/**
 * Philox blocks for counters c … c+n−1 (c an integer < 2^53; c2 as given, c3 = 0) under `key`:
 * `words` uint32 per block (the first 2 or all 4 outputs, x0 first), from the wasm generator, else
 * computed into `scratch` (at least n·words long) with {@link philox4x32}. The returned view is valid
 * until the next call on this thread. @throws if n·words exceeds PHILOX_WASM_MAX_WORDS.
 */
export function philoxBlocksInto(key: readonly [number, number], c: number, c2: number, n: number, words: 2 | 4, scratch: Uint32Array): Uint32Array {
  const w = philoxBlocks(key, c, c2, n, words);
  if (w) return w;
  const blk = new Uint32Array(4);
  for (let i = 0; i < n; i++) {
    const ci = c + i;
    philox4x32(ci >>> 0, Math.floor(ci / 4294967296) >>> 0, c2, 0, key[0], key[1], blk);
    for (let k = 0; k < words; k++) scratch[i * words + k] = blk[k]!;
  }
  return scratch;
}
