/**
 * Value-based rounding of a double to a 16-bit binary float (f16, bf16): 1 sign bit, an exponent
 * field of `bias`·2+1 all-ones for inf/NaN, `mant` mantissa bits. Rounds the exact double once,
 * ties to even, by scaling with powers of two (every step exact).
 */

/** Round-half-to-even of a non-negative double whose fractional part is exactly representable. */
function roundHalfEven(q: number): number {
  const f = Math.floor(q);
  const d = q - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** Bits of the format (`mant` mantissa bits, exponent bias `bias`) nearest to `x`. Overflow gives
 * ±inf; NaN gives `nanBits`; subnormals keep quantum 2^(1 − bias − mant), and a result of 2^mant
 * there is the smallest normal, encoded the same way. */
export function narrowFromNumber(x: number, mant: number, bias: number, nanBits: number): number {
  if (Number.isNaN(x)) return nanBits;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const inf = sign | ((2 * bias + 1) << mant);
  const a = Math.abs(x);
  if (a === Infinity) return inf;
  const emin = 1 - bias;
  if (a < 2 ** emin) return sign | roundHalfEven(a * 2 ** (mant - emin));
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  const one = 2 ** mant;
  let r = roundHalfEven(a * 2 ** (mant - e)); // in [one, 2·one]
  if (r === 2 * one) {
    r = one;
    e++;
  }
  if (e > bias) return inf;
  return sign | ((e + bias) << mant) | (r - one);
}
