/**
 * From Philox words to f32 samples with integer arithmetic only, so that every implementation — this
 * TypeScript, the WGSL kernel (kernels/src/wgsl/random.ts), any GPU, any libm — gives the same bits.
 *
 * Why integers: WGSL's `log`, `cos`, `sqrt` are not correctly rounded (their accuracy is a few ulp,
 * driver-defined), and a shader compiler may contract `a * b + c` into a fused multiply-add, so a
 * float transform cannot be bit-identical between the host and GPUs. Every step below is an exact
 * function of 32-bit integers (add, subtract, shifts, count-leading-zeros, and the high/low words of
 * 32×32-bit products), with fixed-point constants derived here from exact BigInt series.
 *
 * Normal pairs (Box & Muller 1958): from Philox outputs x0, x1 with u1 = (x0+1)/2^32 and
 * θ = 2π·(x1+1)/2^32 (both in (0, 1] resp. (0, 2π], as the host `normalFill` in core/src/tensor/random.ts),
 * z_cos = std·√(−2 ln u1)·cos θ and z_sin = std·√(−2 ln u1)·sin θ, rounded once to f32 (nearest even)
 * from a 32-bit mantissa. Quantities are carried as (M, E) = M·2^(E−32) with M in [2^31, 2^32):
 * - −ln u1 = n·ln2 − ln g with u1 = g·2^−n, g in [1/2, 1): for g ≥ √½ as t·Σ t^k/(k+1) (t = 1−g ≤
 *   0.293, 18 terms), else with h = 2g = 1+t as (n+1)·ln2 − t·Σ (−t)^k/(k+1) (t < 0.415, 23 terms);
 *   Horner in Q1.31 on the exact t, the ln2 multiple in 64-bit Q5.59;
 * - r = √(2L): the exact integer square root (floor) of a 64-bit value;
 * - θ reduced exactly to an octant, α = (π/4)·v with v in [0, 1]: sin α = v·Σ (−1)^k a_k v^2k
 *   (a_k = (π/4)^(2k+1)/(2k+1)!, k ≤ 5), cos α = Σ (−1)^k b_k v^2k (b_k = (π/4)^2k/(2k)!, k ≤ 5; the
 *   next terms are below Q1.31's resolution).
 * The result is within about 2^−29 (relative) of the exact value, so nearly all samples equal the
 * f64 formula rounded to f32 (the tests measure how many); x0 = 2^32−1 (u1 = 1) gives +0 twice.
 *
 * Uniform words: u = ⌊x/2^8⌋·2^−24 (exact in f32) and lo + (hi − lo)·u as two f32 operations, each
 * correctly rounded on the host (f64 then one rounding, innocuous for one + or ×) and in WGSL (whose
 * `+` and `*` are correctly rounded; an integer xor with a runtime zero between them stops
 * contraction into an fma). Inputs are checked so no intermediate is subnormal (which WGSL may
 * flush).
 */
import { mulhi32 } from "./philox.ts";

// ---- constants from exact series -----------------------------------------------------------------

const S = 160n; // binary digits of the BigInt fixed-point series
const ONE = 1n << S;

function atanInv(x: bigint): bigint {
  // atan(1/x) = Σ (−1)^k / ((2k+1)·x^(2k+1))
  let sum = 0n;
  let p = ONE / x;
  const x2 = x * x;
  for (let k = 0n; p !== 0n; k++) {
    const term = p / (2n * k + 1n);
    sum += k % 2n === 0n ? term : -term;
    p /= x2;
  }
  return sum;
}

/** π/4 (Machin: 4·atan(1/5) − atan(1/239)) and ln 2 (Σ 1/(k·2^k)) in fixed point 2^−160. */
const QUARTER_PI = 4n * atanInv(5n) - atanInv(239n);
const LN2 = (() => {
  let sum = 0n;
  for (let k = 1n; k <= S + 8n; k++) sum += ONE / (k << k);
  return sum;
})();

/** round(v · 2^bits) for a fixed-point v (2^−160). */
function roundTo(v: bigint, bits: bigint): bigint {
  return (v + (1n << (S - bits - 1n))) >> (S - bits);
}

/** c^k/k! (c = π/4) for k = 0 … 15 in fixed point: the Taylor terms of sin and cos. */
const TRIG: bigint[] = (() => {
  const out: bigint[] = [];
  let p = ONE;
  for (let k = 0n; k < 16n; k++) {
    out.push(p);
    p = (p * QUARTER_PI) / ONE / (k + 1n);
  }
  return out;
})();

/** sin(α)/v as Σ (−1)^k SIN_Q31[k]·V^k, V = v², α = (π/4)v: SIN_Q31[k] = round(2^31·(π/4)^(2k+1)/(2k+1)!). */
export const SIN_Q31: readonly number[] = Array.from({ length: 6 }, (_, k) => Number(roundTo(TRIG[2 * k + 1]!, 31n)));
/** cos(α) as Σ (−1)^k COS_Q31[k]·V^k: COS_Q31[k] = round(2^31·(π/4)^(2k)/(2k)!). */
export const COS_Q31: readonly number[] = Array.from({ length: 6 }, (_, k) => Number(roundTo(TRIG[2 * k]!, 31n)));
/** round(2^31/(k+1)), k = 0 … 22: the series of ln(1 ± t)/t. */
export const LOG_Q31: readonly number[] = Array.from({ length: 23 }, (_, k) => Math.round(2147483648 / (k + 1)));
/** Highest Horner index of −ln(1−t)/t (t ≤ 0.293) and of ln(1+t)/t (t < 0.415). */
export const LOG_TERMS_NEAR_ONE = 17;
export const LOG_TERMS_ABOVE_ONE = 22;
const LN2_Q59 = roundTo(LN2, 59n);
/** round(ln2·2^59) as two words (high, low). */
export const LN2_Q59_HI = Number(LN2_Q59 >> 32n);
export const LN2_Q59_LO = Number(LN2_Q59 & 0xffffffffn);
/** ⌈√½·2^32⌉: mantissas at or above it take the near-one branch of the logarithm. */
export const SQRT_HALF_Q32 = 0xb504f334;

// ---- (M, E) arithmetic -----------------------------------------------------------------------------

let gM = 0;
let gE = 0;

/** floor(a·b / 2^31) for a, b ≤ 2^31. */
function mul31(a: number, b: number): number {
  return ((mulhi32(a, b) << 1) | (Math.imul(a, b) >>> 31)) >>> 0;
}

/** (gM, gE) := product of (aM, aE) and (bM, bE), truncated to a normalized 32-bit mantissa. */
function mulME(aM: number, aE: number, bM: number, bE: number): void {
  const hi = mulhi32(aM, bM);
  if (hi >= 0x80000000) {
    gM = hi;
    gE = aE + bE;
  } else {
    gM = ((hi << 1) | (Math.imul(aM, bM) >>> 31)) >>> 0;
    gE = aE + bE - 1;
  }
}

/** (gM, gE) := the 64-bit Q5.59 value (h, l), h ≠ 0. */
function fromQ59(h: number, l: number): void {
  const c = Math.clz32(h);
  gM = c === 0 ? h : ((h << c) | (l >>> (32 - c))) >>> 0;
  gE = 5 - c;
}

/** (qH, qL) := (gM, gE) as a 64-bit Q5.59 value (qH·2^32 + qL = gM·2^(gE+27)), truncated (WGSL: q59_of); gE ≤ 5,
 * and 0 when the value is below 2^−59 (gE + 27 ≤ −32). */
let qH = 0;
let qL = 0;
function toQ59(): void {
  const sh = gE + 27;
  qH = 0;
  qL = 0;
  if (sh > 0) {
    qH = gM >>> (32 - sh);
    qL = (gM << sh) >>> 0;
  } else if (sh === 0) qL = gM;
  else if (sh > -32) qL = gM >>> -sh;
}

/** ⌊√(h·2^32 + l)⌋ for a value with at most 33 significant bits (exact in a double): the
 * correctly rounded double square root is at most 1 above the floor's range, corrected by an exact
 * 64-bit comparison of s². */
function isqrt64(h: number, l: number): number {
  let s = Math.floor(Math.sqrt(h * 4294967296 + l));
  if (s > 0xffffffff) s = 0xffffffff;
  const sh = mulhi32(s, s);
  const sl = Math.imul(s, s) >>> 0;
  if (sh > h || (sh === h && sl > l)) s -= 1;
  return s;
}

/** f32 bits of (−1)^neg · M·2^(E−32), M normalized, rounded to nearest even from its low 8 bits;
 * below 2^−126 gives ±0, above the f32 range ±inf. */
function f32Bits(M: number, E: number, neg: boolean): number {
  const sign = neg ? 0x80000000 : 0;
  if (M === 0) return sign >>> 0;
  let biased = E + 126;
  let mant = M >>> 8;
  const rem = M & 0xff;
  if (rem > 0x80 || (rem === 0x80 && (mant & 1) === 1)) mant += 1;
  if (mant === 0x1000000) {
    mant = 0x800000;
    biased += 1;
  }
  if (biased <= 0) return sign >>> 0;
  if (biased >= 255) return (sign | 0x7f800000) >>> 0;
  return (sign | (biased << 23) | (mant & 0x7fffff)) >>> 0;
}

// ---- normal pairs ----------------------------------------------------------------------------------

/** A positive scale as a normalized 32-bit mantissa and exponent: std ≈ m·2^(e−32), m in [2^31, 2^32)
 * (rounded to nearest from the double), or m = 0 for std = 0.
 * @throws naming `what` unless std is 0 or in [2^−100, 2^100]. */
export function scaleParts(std: number, what = "std"): { m: number; e: number } {
  if (std === 0) return { m: 0, e: 0 };
  if (!Number.isFinite(std) || std < 2 ** -100 || std > 2 ** 100) throw new Error(`${what} must be 0 or within [2^-100, 2^100], got ${std}`);
  let e = Math.floor(Math.log2(std)) + 1;
  let m = Math.round(std * 2 ** (32 - e));
  while (m >= 4294967296) {
    e += 1;
    m = Math.round(std * 2 ** (32 - e));
  }
  while (m < 2147483648) {
    e -= 1;
    m = Math.round(std * 2 ** (32 - e));
  }
  return { m, e };
}

/**
 * The Box–Muller pair of Philox words (x0, x1) scaled by std = (sm, se) ({@link scaleParts}), as f32
 * bits: out[o] = the cosine half (even stream elements), out[o + 1] = the sine half (odd ones).
 * See the module comment for the algorithm.
 */
export function normalPairBits(x0: number, x1: number, sm: number, se: number, out: Uint32Array, o: number): void {
  x0 >>>= 0;
  x1 >>>= 0;
  if (x0 === 0xffffffff || sm === 0) {
    out[o] = 0;
    out[o + 1] = 0;
    return;
  }
  // L = −ln u1, u1 = (x0 + 1)/2^32 = g·2^−n
  const m = x0 + 1;
  const n = Math.clz32(m);
  const F = (m << n) >>> 0;
  let LM: number;
  let LE: number;
  if (F >= SQRT_HALF_Q32) {
    const T = 4294967296 - F; // t = 1 − g, in (0, 0.293]
    let acc = LOG_Q31[LOG_TERMS_NEAR_ONE]!;
    for (let k = LOG_TERMS_NEAR_ONE - 1; k >= 0; k--) acc = (LOG_Q31[k]! + mulhi32(T, acc)) >>> 0;
    const nT = Math.clz32(T);
    mulME((T << nT) >>> 0, -nT, acc, 1); // acc ≥ 2^31: already normalized
    if (n === 0) {
      LM = gM;
      LE = gE;
    } else {
      // n·ln2 + q in Q5.59
      const pl = Math.imul(LN2_Q59_LO, n) >>> 0;
      let h = (Math.imul(LN2_Q59_HI, n) + mulhi32(LN2_Q59_LO, n)) >>> 0;
      toQ59();
      const l = (pl + qL) >>> 0;
      h = (h + qH + (l < pl ? 1 : 0)) >>> 0;
      fromQ59(h, l);
      LM = gM;
      LE = gE;
    }
  } else {
    const T = (F << 1) >>> 0; // h = 2g = 1 + t, t in [0, 0.415)
    const pl = Math.imul(LN2_Q59_LO, n + 1) >>> 0;
    let h = (Math.imul(LN2_Q59_HI, n + 1) + mulhi32(LN2_Q59_LO, n + 1)) >>> 0;
    let l = pl;
    if (T !== 0) {
      let acc = LOG_Q31[LOG_TERMS_ABOVE_ONE]!;
      for (let k = LOG_TERMS_ABOVE_ONE - 1; k >= 0; k--) acc = (LOG_Q31[k]! - mulhi32(T, acc)) >>> 0;
      const nA = Math.clz32(acc);
      const nT = Math.clz32(T);
      mulME((T << nT) >>> 0, -nT, (acc << nA) >>> 0, 1 - nA);
      // (n+1)·ln2 − q in Q5.59 (q < 0.35: gE ≤ 0)
      toQ59();
      l = (pl - qL) >>> 0;
      h = (h - qH - (pl < qL ? 1 : 0)) >>> 0;
    }
    fromQ59(h, l);
    LM = gM;
    LE = gE;
  }
  // r = √(2L): 2L = LM·2^(LE+1−32)
  const e2 = LE + 1;
  let rM: number;
  let rE: number;
  if ((e2 & 1) === 0) {
    rM = isqrt64(LM, 0);
    rE = e2 >> 1;
  } else {
    rM = isqrt64(LM >>> 1, (LM & 1) * 0x80000000);
    rE = (e2 + 1) >> 1;
  }
  // θ = 2π·W/2^32 = (π/4)·(octant + s/2^29); α = (π/4)·v, v = s'/2^29 in [0, 1]
  const W = (x1 + 1) >>> 0;
  const oct = W >>> 29;
  const s = W & 0x1fffffff;
  const sp = (oct & 1) === 1 ? 0x20000000 - s : s;
  const vq = (sp << 2) >>> 0; // Q1.31
  const V = mul31(vq, vq);
  let c = COS_Q31[5]!;
  for (let k = 4; k >= 0; k--) c = (COS_Q31[k]! - mul31(V, c)) >>> 0;
  const nC = Math.clz32(c);
  const cosM = (c << nC) >>> 0;
  const cosE = 1 - nC;
  let sinM = 0;
  let sinE = 0;
  if (sp !== 0) {
    let p = SIN_Q31[5]!;
    for (let k = 4; k >= 0; k--) p = (SIN_Q31[k]! - mul31(V, p)) >>> 0;
    const nP = Math.clz32(p);
    const nS = Math.clz32(sp);
    mulME((sp << nS) >>> 0, 3 - nS, (p << nP) >>> 0, 1 - nP);
    sinM = gM;
    sinE = gE;
  }
  // cos φ, sin φ of the quadrant's angle φ (α, or π/2 − α in odd octants), then the quadrant
  const odd = (oct & 1) === 1;
  const cpM = odd ? sinM : cosM, cpE = odd ? sinE : cosE;
  const spM = odd ? cosM : sinM, spE = odd ? cosE : sinE;
  const q = oct >>> 1;
  const swap = (q & 1) === 1;
  const aM = swap ? spM : cpM, aE = swap ? spE : cpE; // |cos θ|
  const bM = swap ? cpM : spM, bE = swap ? cpE : spE; // |sin θ|
  const cosNeg = q === 1 || q === 2;
  const sinNeg = q === 2 || q === 3;
  if (aM === 0) out[o] = 0;
  else {
    mulME(rM, rE, aM, aE);
    mulME(gM, gE, sm, se);
    out[o] = f32Bits(gM, gE, cosNeg);
  }
  if (bM === 0) out[o + 1] = 0;
  else {
    mulME(rM, rE, bM, bE);
    mulME(gM, gE, sm, se);
    out[o + 1] = f32Bits(gM, gE, sinNeg);
  }
}

// ---- uniform words ---------------------------------------------------------------------------------

/** f32 bounds of a uniform draw: lo32 = f32(lo), span32 = f32(f32(hi) − lo32).
 * @throws naming `what` unless lo ≤ hi are finite, and lo32 and span32 are 0 or at least 2^−100 in
 * magnitude (no subnormal intermediate; results then lie in [lo32, lo32 + span32]). */
export function uniformParts(lo: number, hi: number, what = "uniform"): { lo32: number; span32: number } {
  if (!Number.isFinite(lo) || !Number.isFinite(hi) || lo > hi) throw new Error(`${what}: lo and hi must be finite with lo ≤ hi, got lo ${lo}, hi ${hi}`);
  const lo32 = Math.fround(lo);
  const span32 = Math.fround(Math.fround(hi) - lo32);
  const tiny = (v: number) => v !== 0 && Math.abs(v) < 2 ** -100;
  if (tiny(lo32) || tiny(span32)) throw new Error(`${what}: lo (${lo}) and hi − lo (${span32}) must each be 0 or at least 2^-100 in magnitude`);
  if (!Number.isFinite(span32)) throw new Error(`${what}: hi − lo (${hi} − ${lo}) overflows f32`);
  return { lo32, span32 };
}

/** The f32 uniform sample of Philox word x: lo32 + span32·(⌊x/2^8⌋·2^−24), each operation rounded
 * to f32 (see the module comment). */
export function uniformValue(x: number, lo32: number, span32: number): number {
  const u = (x >>> 8) * 5.9604644775390625e-8;
  return Math.fround(lo32 + Math.fround(span32 * u));
}
