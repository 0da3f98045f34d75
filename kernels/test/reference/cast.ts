/**
 * Reference 16-bit encodings, independent of kernels/src/numerics: f16 via the ES2025 built-ins
 * Math.f16round/DataView.setFloat16; bf16 by picking the nearer of the two bracketing bf16 values
 * (ties to even mantissa) in float64.
 */

const dv = new DataView(new ArrayBuffer(4));

/** f16 bits of x, nearest even; NaN → a NaN pattern. */
export function refF16Bits(x: number): number {
  dv.setFloat16(0, x);
  return dv.getUint16(0);
}

/** Value of f16 bits h. */
export function refF16Value(h: number): number {
  dv.setUint16(0, h);
  return dv.getFloat16(0);
}

/** Value of bf16 bits h: (−1)^s 2^(e−127)(1 + m/128), subnormals m·2^−133. */
export function refBf16Value(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 7) & 0xff;
  const m = h & 0x7f;
  if (e === 0xff) return m === 0 ? s * Infinity : NaN;
  if (e === 0) return s * m * 2 ** -133;
  return s * (1 + m / 128) * 2 ** (e - 127);
}

/** bf16 bits nearest to x (x an f32 value or any double within f32 range). */
export function refBf16Bits(x: number): number {
  if (Number.isNaN(x)) return 0x7fc0;
  if (x === Infinity) return 0x7f80;
  if (x === -Infinity) return 0xff80;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  // binary search the largest magnitude pattern ≤ a among 0..0x7f80
  let lo = 0;
  let hi = 0x7f80;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (refBf16Value(mid) <= a) lo = mid;
    else hi = mid - 1;
  }
  if (lo === 0x7f80) return sign | 0x7f80;
  const up = lo + 1;
  const vUp = up === 0x7f80 ? 2 ** 128 : refBf16Value(up);
  const dLo = a - refBf16Value(lo);
  const dUp = vUp - a;
  const pick = dLo < dUp ? lo : dUp < dLo ? up : lo % 2 === 0 ? lo : up;
  return sign | pick;
}
