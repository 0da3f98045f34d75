/**
 * The error function in double precision (JavaScript has no Math.erf), for the exact GELU.
 *
 * |x| < 2: Maclaurin series erf(x) = 2/√π Σ (−1)^n x^(2n+1) / (n! (2n+1)) (Abramowitz & Stegun
 * 7.1.5), at most ~1 digit lost to cancellation at |x| = 2. |x| ≥ 2: erfc by the Laplace continued
 * fraction erfc(x) = e^(−x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …)))) (A&S 7.1.14), evaluated
 * bottom-up with a fixed depth. Relative error below 1e-14 on the whole line.
 */

const TWO_OVER_SQRT_PI = 1.1283791670955126;
const ONE_OVER_SQRT_PI = 0.5641895835477563;

/** erf(x) for a double x; erf(±inf) = ±1, erf(NaN) = NaN. */
export function erf(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const a = Math.abs(x);
  if (a < 2) {
    const x2 = x * x;
    let term = x; // x^(2n+1) (−1)^n / n!
    let sum = x;
    for (let n = 1; n < 60; n++) {
      term *= -x2 / n;
      const t = term / (2 * n + 1);
      sum += t;
      if (Math.abs(t) < 1e-17 * Math.abs(sum)) break;
    }
    return TWO_OVER_SQRT_PI * sum;
  }
  if (a > 6) return x > 0 ? 1 : -1;
  const c = erfcContinuedFraction(a);
  return x > 0 ? 1 - c : c - 1;
}

/** erfc(a) for a ≥ 2 by the continued fraction (depth 80: converged to double precision at a = 2). */
function erfcContinuedFraction(a: number): number {
  let f = a;
  for (let k = 80; k >= 1; k--) f = a + k / 2 / f;
  return (Math.exp(-a * a) * ONE_OVER_SQRT_PI) / f;
}
