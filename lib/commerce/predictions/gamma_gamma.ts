/**
 * The Gamma-Gamma model of spend per transaction (Fader and Hardie 2013, "The Gamma-Gamma Model
 * of Monetary Value"): a customer's transaction values are gamma(p, nu) around her own mean, and
 * nu is gamma(q, gamma) across customers. Fitted on customers with repeat transactions (`x` > 0)
 * and their mean repeat spend; deterministic like the purchase models.
 *
 * @module
 */
import { lnGamma } from "./special_functions.ts";
import { nelderMead } from "./nelder_mead.ts";

/** Fitted Gamma-Gamma parameters. */
export interface GammaGammaParams {
  p: number;
  q: number;
  gamma: number;
}

/** What the spend model reads of a customer: repeat transactions and their mean value. */
export interface SpendRow {
  x: number;
  spend: number;
}

/** The rows the model is fitted on: repeat buyers with a positive mean spend. */
export function spendRows<T extends SpendRow>(rows: readonly T[]): T[] {
  return rows.filter((row) => row.x > 0 && row.spend > 0);
}

/** The log-likelihood of one customer's mean spend. */
export function spendLogLikelihood({ p, q, gamma }: GammaGammaParams, { x, spend }: SpendRow) {
  const px = p * x;
  return lnGamma(px + q) - lnGamma(px) - lnGamma(q) + q * Math.log(gamma) +
    (px - 1) * Math.log(spend) + px * Math.log(x) - (px + q) * Math.log(gamma + spend * x);
}

/**
 * The maximum-likelihood parameters over the repeat buyers among `rows` (Nelder-Mead on the
 * log-parameters from p = q = 1, gamma = the mean spend); null with fewer than 2 of them.
 */
export function fitGammaGamma(rows: readonly SpendRow[]): GammaGammaParams | null {
  const usable = spendRows(rows);
  if (usable.length < 2) return null;
  const logSpend = usable.map((row) => Math.log(row.spend));
  const mean = usable.reduce((s, row) => s + row.spend, 0) / usable.length;
  const negative = (point: number[]) => {
    const p = Math.exp(point[0]!);
    const q = Math.exp(point[1]!);
    const gamma = Math.exp(point[2]!);
    // The log-gammas depend on x only: one evaluation per distinct x.
    const byX = new Map<number, number>();
    const qTerms = q * Math.log(gamma) - lnGamma(q);
    let sum = 0;
    for (let i = 0; i < usable.length; i++) {
      const { x, spend } = usable[i]!;
      const px = p * x;
      let terms = byX.get(x);
      if (terms === undefined) {
        byX.set(x, terms = lnGamma(px + q) - lnGamma(px) + px * Math.log(x));
      }
      sum += terms + (px - 1) * logSpend[i]! - (px + q) * Math.log(gamma + spend * x);
    }
    return -(sum / usable.length + qTerms);
  };
  const found = nelderMead(negative, [0, 0, Math.log(mean)], {
    tolerance: 1e-10,
    pointTolerance: 1e-6,
    maxIterations: 4_000,
  });
  return {
    p: Math.exp(found.point[0]!),
    q: Math.exp(found.point[1]!),
    gamma: Math.exp(found.point[2]!),
  };
}

/**
 * The customer's expected spend per transaction: her mean weighted against the population's,
 * p(gamma + x·spend) / (p·x + q − 1); for x = 0 the population mean p·gamma / (q − 1).
 */
export function conditionalExpectedSpend(
  { p, q, gamma }: GammaGammaParams,
  { x, spend }: SpendRow,
): number {
  return (p * (gamma + x * spend)) / (p * x + q - 1);
}
