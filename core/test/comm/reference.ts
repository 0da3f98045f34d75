/**
 * Independent reference for the collective tests: random-access random data (a hash of seed, rank
 * and index, so any rank can recompute any other rank's input) and element-by-element reductions
 * written with Math.fround / DataView / neighbour search rather than the typed-array tricks of
 * core/src/comm/reduce.ts.
 */

import type { CommArray } from "../../src/comm/communicator.ts";

/** Element kinds under test. `bf16`/`f16` are Uint16Array bit patterns. */
export type Kind = "f32" | "f64" | "bf16" | "f16" | "i32" | "u32";
/** Every kind, for loops over them. */
export const KINDS: readonly Kind[] = ["f32", "f64", "bf16", "f16", "i32", "u32"];

/** murmur3 fmix32 of a 32-bit input. */
function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Uniform 32-bit hash of (seed, rank, i). */
export function hash(seed: number, rank: number, i: number): number {
  return fmix(fmix(fmix(seed ^ 0x9e3779b9) ^ Math.imul(rank + 1, 0x27d4eb2d)) ^ i);
}

/** A random finite double in ±[2⁻⁸, 2⁸) with varied exponents (exercises rounding). */
export function rndValue(seed: number, rank: number, i: number): number {
  const h = hash(seed, rank, i);
  const h2 = hash(seed + 1, rank, i);
  const mant = 1 + (h >>> 8) / 16777216;
  const exp = (h2 % 16) - 8;
  return (h & 1 ? -1 : 1) * mant * 2 ** exp;
}

const dv = new DataView(new ArrayBuffer(8));

/** f32 bits → bf16 bits by truncation (exact for values already representable). */
export function bf16ToNumber(bits: number): number {
  dv.setUint32(0, (bits & 0xffff) << 16);
  return dv.getFloat32(0);
}

/** Nearest-even rounding of a double (already an f32 value) to bf16 bits, by comparing the two
 * bf16 neighbours (independent of the bit-trick in reduce.ts). */
export function numberToBf16(x: number): number {
  if (Number.isNaN(x)) return 0x7fc0;
  dv.setFloat32(0, x);
  const lo = dv.getUint32(0) >>> 16;
  const loV = bf16ToNumber(lo);
  if (loV === x) return lo;
  const hi = (lo + 1) & 0xffff;
  const hiV = bf16ToNumber(hi);
  const dLo = Math.abs(x - loV);
  const dHi = Math.abs(hiV - x);
  if (dLo < dHi) return lo;
  if (dHi < dLo) return hi;
  return lo & 1 ? hi : lo;
}

/** f16 bits → number, through DataView.getFloat16. */
export function f16ToNumber(bits: number): number {
  dv.setUint16(0, bits);
  return (dv as DataView & { getFloat16(o: number): number }).getFloat16(0);
}
/** Number → f16 bits, rounding to nearest even (DataView.setFloat16). */
export function numberToF16(x: number): number {
  (dv as DataView & { setFloat16(o: number, v: number): void }).setFloat16(0, x);
  return dv.getUint16(0);
}

/** Random element `i` of rank `rank`'s array, as stored (bits for 16-bit kinds). */
export function elem(kind: Kind, seed: number, rank: number, i: number): number {
  switch (kind) {
    case "f32":
      return Math.fround(rndValue(seed, rank, i));
    case "f64":
      return rndValue(seed, rank, i) * (1 + hash(seed + 7, rank, i) / 2 ** 40);
    case "bf16":
      return numberToBf16(Math.fround(rndValue(seed, rank, i)));
    case "f16":
      return numberToF16(rndValue(seed, rank, i));
    case "i32":
      return hash(seed, rank, i) | 0;
    case "u32":
      return hash(seed, rank, i) >>> 0;
  }
}

/** A fresh array of `kind` with `n` elements. */
export function alloc(kind: Kind, n: number): CommArray {
  switch (kind) {
    case "f32":
      return new Float32Array(n);
    case "f64":
      return new Float64Array(n);
    case "bf16":
    case "f16":
      return new Uint16Array(n);
    case "i32":
      return new Int32Array(n);
    case "u32":
      return new Uint32Array(n);
  }
}

/** Rank `rank`'s random input of `n` elements, starting at index `start` of the stream. */
export function randomArray(kind: Kind, seed: number, rank: number, n: number, start = 0): CommArray {
  const a = alloc(kind, n);
  for (let i = 0; i < n; i++) a[i] = elem(kind, seed, rank, start + i);
  return a;
}

/**
 * Reference reduction of element `i` over `ranks` (in that order): sequential ⊕ in the kind's
 * precision, then /n when `average`; result as stored (bits for 16-bit kinds).
 */
export function refReduce(kind: Kind, seed: number, ranks: readonly number[], i: number, op: "sum" | "max", average: boolean): number {
  const vals = ranks.map((r) => elem(kind, seed, r, i));
  const n = ranks.length;
  const comb = (a: number, b: number): number => (op === "max" ? (Number.isNaN(a) || Number.isNaN(b) ? NaN : b > a ? b : a) : a + b);
  switch (kind) {
    case "f32": {
      let acc = vals[0];
      for (let k = 1; k < n; k++) acc = Math.fround(comb(acc, vals[k]));
      return average ? Math.fround(acc / n) : acc;
    }
    case "f64": {
      let acc = vals[0];
      for (let k = 1; k < n; k++) acc = comb(acc, vals[k]);
      return average ? acc / n : acc;
    }
    case "bf16":
    case "f16": {
      const dec = kind === "bf16" ? bf16ToNumber : f16ToNumber;
      let acc = dec(vals[0]);
      for (let k = 1; k < n; k++) acc = Math.fround(comb(acc, dec(vals[k])));
      if (average) acc = Math.fround(acc / n);
      return kind === "bf16" ? numberToBf16(acc) : numberToF16(acc);
    }
    case "i32": {
      let acc = vals[0];
      for (let k = 1; k < n; k++) acc = op === "max" ? Math.max(acc, vals[k]) : (acc + vals[k]) | 0;
      return acc;
    }
    case "u32": {
      let acc = vals[0];
      for (let k = 1; k < n; k++) acc = op === "max" ? Math.max(acc, vals[k]) : (acc + vals[k]) >>> 0;
      return acc;
    }
  }
}

/** Same value as stored in a typed array (NaN-aware equality on bits for floats). */
export function sameStored(a: number, b: number): boolean {
  return a === b || (Number.isNaN(a) && Number.isNaN(b)) || (Object.is(a, 0) && Object.is(b, 0));
}

/** A cheap random-access f32 value of rank `rank` at index `i` (one multiply-hash), for arrays of
 * hundreds of MB where {@link elem} would be too slow to fill. */
export function cheapValue(seed: number, rank: number, i: number): number {
  const h = Math.imul((i + seed) ^ Math.imul(rank + 1, 0x632be5ab), 0x9e3779b1) >>> 8;
  return Math.fround((h / 16777216 - 0.5) * (1 + rank));
}
