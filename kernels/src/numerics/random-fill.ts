/**
 * Host fills of the Philox streams ({@link RandomFillSpec}, backend.ts `randomFill`): the reference
 * the cpu backend runs and the WGSL kernel (kernels/src/wgsl/random.ts) equals bit for bit.
 *
 * Stream layout (the same counters as core/src/tensor/random.ts `normalFill`/`uniformFill`): element i
 * of a normal stream is the cosine (even i) or sine (odd i) half of the Box–Muller pair of Philox
 * counter ⌊i/2⌋ (c2 = 0, words x0, x1); element i of a uniform stream is word i mod 4 of counter
 * ⌊i/4⌋ (c2 = 1). The f32 transforms are ./philox-transform.ts.
 */
import type { RandomFillSpec } from "../backend.ts";
import { philoxBlocksInto } from "./philox.ts";
import { normalPairBits, scaleParts, uniformParts, uniformValue } from "./philox-transform.ts";

/** Blocks per generator call (one wasm page of words). */
const CHUNK = 2048;

/** Check a spec for `n` elements; returns nothing, @throws naming the field. */
export function checkRandomFillSpec(spec: RandomFillSpec, n: number, op = "randomFill"): void {
  if (spec === null || typeof spec !== "object") throw new Error(`${op}: spec must be an object {dist, key, start, …}`);
  const k = spec.key as unknown;
  if (!Array.isArray(k) || k.length !== 2 || !k.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffffffff)) throw new Error(`${op}: spec.key must be two uint32 words, got ${JSON.stringify(k)}`);
  if (!Number.isInteger(spec.start) || spec.start < 0 || spec.start + n > Number.MAX_SAFE_INTEGER) throw new Error(`${op}: spec.start must be an integer ≥ 0 with start + n ≤ 2^53 − 1, got ${spec.start} (n ${n})`);
  if (spec.dist === "normal") scaleParts(spec.std, `${op}: spec.std`);
  else if (spec.dist === "uniform") uniformParts(spec.lo, spec.hi, `${op}: spec`);
  else throw new Error(`${op}: spec.dist must be "normal" or "uniform", got ${JSON.stringify((spec as { dist: unknown }).dist)}`);
}

/**
 * out[j] = element spec.start + j of the stream, for j < out.length (see the module comment).
 * @throws as {@link checkRandomFillSpec}.
 */
export function philoxFill(out: Float32Array, spec: RandomFillSpec): void {
  const n = out.length;
  checkRandomFillSpec(spec, n);
  if (n === 0) return;
  const bits = new Uint32Array(out.buffer, out.byteOffset, n);
  const scratch = new Uint32Array(4 * CHUNK);
  if (spec.dist === "normal") {
    const { m, e } = scaleParts(spec.std);
    const pair = new Uint32Array(2);
    const first = spec.start;
    let c = Math.floor(first / 2);
    const cEnd = Math.floor((first + n - 1) / 2); // last counter, inclusive
    while (c <= cEnd) {
      const nb = Math.min(CHUNK, cEnd - c + 1);
      const w = philoxBlocksInto(spec.key, c, 0, nb, 2, scratch);
      for (let b = 0; b < nb; b++) {
        const i = 2 * (c + b) - first; // position of the pair's even element in `out`
        if (i >= 0 && i + 1 < n) normalPairBits(w[2 * b]!, w[2 * b + 1]!, m, e, bits, i);
        else {
          normalPairBits(w[2 * b]!, w[2 * b + 1]!, m, e, pair, 0);
          if (i >= 0) bits[i] = pair[0]!;
          if (i + 1 >= 0 && i + 1 < n) bits[i + 1] = pair[1]!;
        }
      }
      c += nb;
    }
    return;
  }
  const { lo32, span32 } = uniformParts(spec.lo, spec.hi);
  const first = spec.start;
  let c = Math.floor(first / 4);
  const cEnd = Math.floor((first + n - 1) / 4);
  while (c <= cEnd) {
    const nb = Math.min(CHUNK, cEnd - c + 1);
    const w = philoxBlocksInto(spec.key, c, 1, nb, 4, scratch);
    const j0 = Math.max(0, 4 * c - first);
    const j1 = Math.min(n, 4 * (c + nb) - first);
    const base = 4 * c - first;
    for (let j = j0; j < j1; j++) out[j] = uniformValue(w[j - base]!, lo32, span32);
    c += nb;
  }
}
