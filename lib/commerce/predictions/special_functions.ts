/**
 * The special functions the purchase models need: the log-gamma function and the Gaussian
 * hypergeometric function 2F1 on [0, 1), in plain floating point (no dependency).
 *
 * @module
 */

// Lanczos coefficients (g = 7, n = 9): double precision over the positive reals.
const _G = 7;
const _LANCZOS = [
  0.99999999999980993,
  676.5203681218851,
  -1259.1392167224028,
  771.32342877765313,
  -176.61502916214059,
  12.507343278686905,
  -0.13857109526572012,
  9.9843695780195716e-6,
  1.5056327351493116e-7,
];
const _HALF_LOG_2PI = 0.5 * Math.log(2 * Math.PI);

/** ln Γ(x) for x > 0. */
export function lnGamma(x: number): number {
  if (!(x > 0)) return Number.NaN;
  // Below 0.5 the recurrence Γ(x) = Γ(x + 1) / x keeps the approximation in its accurate range.
  if (x < 0.5) return lnGamma(x + 1) - Math.log(x);
  const y = x - 1;
  let sum = _LANCZOS[0]!;
  for (let i = 1; i < _LANCZOS.length; i++) sum += _LANCZOS[i]! / (y + i);
  const t = y + _G + 0.5;
  return _HALF_LOG_2PI + (y + 0.5) * Math.log(t) - t + Math.log(sum);
}

/** ln B(a, b), the log of the beta function. */
export function lnBeta(a: number, b: number): number {
  return lnGamma(a) + lnGamma(b) - lnGamma(a + b);
}

/**
 * 2F1(a, b; c; z) for a, b, c > 0 and 0 <= z < 1, by its power series. Every term is positive
 * there, so the partial sums rise monotonically and the sum stops once a term no longer moves
 * it; near z = 1 that takes more terms, never a wrong answer.
 */
export function hyp2f1(a: number, b: number, c: number, z: number): number {
  if (z === 0) return 1;
  if (!(z > 0 && z < 1)) return Number.NaN;
  let term = 1;
  let sum = 1;
  for (let k = 0; k < 1_000_000; k++) {
    term *= ((a + k) * (b + k)) / ((c + k) * (k + 1)) * z;
    sum += term;
    if (term <= sum * 1e-16) break;
  }
  return sum;
}
