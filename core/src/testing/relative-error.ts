/**
 * The error measure of the parity tests against a reference implementation (Hugging Face
 * fixtures, the built-in router): the largest elementwise difference relative to the reference
 * tensor's largest magnitude, so a tolerance reads as "digits of the tensor's scale" and one tiny
 * reference element does not blow it up.
 */

/**
 * max_i |a_i − b_i| / max_i |b_i|, with b the reference (a denominator below 1e-30 counts as 1e-30).
 * @throws when the lengths differ.
 */
export function maxRelativeError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`maxRelativeError: ${a.length} values against a reference of ${b.length}`);
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num = Math.max(num, Math.abs(Number(a[i]) - Number(b[i])));
    den = Math.max(den, Math.abs(Number(b[i])));
  }
  return num / Math.max(den, 1e-30);
}
