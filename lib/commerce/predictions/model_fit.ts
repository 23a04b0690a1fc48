/**
 * A brand's predictive model from its customers' histories: both purchase models (BG/NBD and
 * MBG/NBD) and Gamma-Gamma fitted as of a cut-off day, the holdout validation that selects the
 * purchase model, and each customer's predictions (P(alive), expected orders, predicted CLV, the
 * expected next order). Pure: no database, no clock. Definitions are in docs/commerce.md.
 *
 * @module
 */
import {
  type CustomerHistory,
  dayText,
  ordersBetween,
  type RfmRow,
  rfmSummary,
} from "./rfm_summary.ts";
import {
  conditionalExpectedPurchases,
  expectedWaitDays,
  fitPurchaseModel,
  pAlive,
  type PurchaseModel,
  type PurchaseParams,
  type PurchaseRow,
} from "./purchase_models.ts";
import {
  conditionalExpectedSpend,
  fitGammaGamma,
  type GammaGammaParams,
  type SpendRow,
} from "./gamma_gamma.ts";

/** Length of the holdout period the purchase model is chosen on. */
export const HOLDOUT_DAYS = 90;

/** The calibration-frequency groups of the validation (repeat orders before the holdout). */
export const FREQUENCY_GROUPS = ["0", "1", "2", "3", "4", "5", "6", "7+"] as const;

/** The fitted parameters of a brand. */
export interface FittedModel {
  selected: PurchaseModel;
  bgnbd: PurchaseParams;
  mbgnbd: PurchaseParams;
  gamma_gamma: GammaGammaParams | null;
  time_unit: "day";
}

/** One calibration-frequency group of the holdout validation. */
export interface FrequencyGroup {
  x: (typeof FREQUENCY_GROUPS)[number];
  customers: number;
  actual: number;
  predicted: number;
  predicted_bgnbd: number;
  predicted_mbgnbd: number;
}

/** The holdout validation: predicted against actual repeat orders in the last 90 days. */
export interface Validation {
  holdout_days: number;
  /** The first holdout day, YYYY-MM-DD. */
  holdout_from: string;
  predicted_repeat_orders: number;
  actual_repeat_orders: number;
  by_frequency: FrequencyGroup[];
  bgnbd_error: number;
  mbgnbd_error: number;
}

function _group(x: number): (typeof FREQUENCY_GROUPS)[number] {
  return x >= 7 ? "7+" : FREQUENCY_GROUPS[x]!;
}

/**
 * Refits both purchase models on the history up to the holdout cut (cut-off − 90 days; customers
 * first seen after it left out) and compares their predicted repeat orders in the holdout with
 * the actual ones per calibration-frequency group. The error of a model is the total absolute
 * difference over the groups. Null when no customer bought before the holdout.
 */
export function holdoutValidation(
  histories: readonly CustomerHistory[],
  cutOffDay: number,
): Validation | null {
  return _holdout(histories, cutOffDay)?.validation ?? null;
}

/** The validation and the calibration fits it made. */
function _holdout(histories: readonly CustomerHistory[], cutOffDay: number) {
  const cut = cutOffDay - HOLDOUT_DAYS;
  const calibration: { row: RfmRow; actual: number }[] = [];
  for (const history of histories) {
    const [row] = rfmSummary([history], cut);
    if (row) calibration.push({ row, actual: ordersBetween(history, cut, cutOffDay) });
  }
  if (calibration.length === 0) return null;
  const rows = calibration.map((c) => c.row);
  const bgnbd = fitPurchaseModel("bgnbd", rows).params;
  const mbgnbd = fitPurchaseModel("mbgnbd", rows).params;
  const groups = FREQUENCY_GROUPS.map((x) => ({
    x,
    customers: 0,
    actual: 0,
    predicted: 0,
    predicted_bgnbd: 0,
    predicted_mbgnbd: 0,
  }));
  for (const { row, actual } of calibration) {
    const group = groups[FREQUENCY_GROUPS.indexOf(_group(row.x))]!;
    group.customers++;
    group.actual += actual;
    group.predicted_bgnbd += conditionalExpectedPurchases("bgnbd", bgnbd, row, HOLDOUT_DAYS);
    group.predicted_mbgnbd += conditionalExpectedPurchases("mbgnbd", mbgnbd, row, HOLDOUT_DAYS);
  }
  const error = (key: "predicted_bgnbd" | "predicted_mbgnbd") =>
    groups.reduce((sum, g) => sum + Math.abs(g[key] - g.actual), 0);
  const bgnbdError = error("predicted_bgnbd");
  const mbgnbdError = error("predicted_mbgnbd");
  const selected: PurchaseModel = mbgnbdError < bgnbdError ? "mbgnbd" : "bgnbd";
  for (const g of groups) g.predicted = g[`predicted_${selected}`];
  const validation: Validation = {
    holdout_days: HOLDOUT_DAYS,
    holdout_from: dayText(cut + 1),
    predicted_repeat_orders: groups.reduce((sum, g) => sum + g.predicted, 0),
    actual_repeat_orders: groups.reduce((sum, g) => sum + g.actual, 0),
    by_frequency: groups,
    bgnbd_error: bgnbdError,
    mbgnbd_error: mbgnbdError,
  };
  return { validation, bgnbd, mbgnbd };
}

/** The selected model of a validation: the smaller error, BG/NBD on a tie or without one. */
export function selectedModel(validation: Validation | null): PurchaseModel {
  if (!validation) return "bgnbd";
  return validation.mbgnbd_error < validation.bgnbd_error ? "mbgnbd" : "bgnbd";
}

/** A brand's fit as of a cut-off day: the parameters, their validation and the summary rows. */
export interface BrandFit {
  model: FittedModel;
  validation: Validation | null;
  rows: RfmRow[];
}

/** Fits every model on the histories as of `cutOffDay` and validates the purchase models. */
export function fitBrandModel(histories: readonly CustomerHistory[], cutOffDay: number): BrandFit {
  const rows = rfmSummary([...histories], cutOffDay);
  const holdout = _holdout(histories, cutOffDay);
  const validation = holdout?.validation ?? null;
  // The full-history fits start from the calibration fits: the same answer in fewer steps.
  return {
    model: {
      selected: selectedModel(validation),
      bgnbd: fitPurchaseModel("bgnbd", rows, holdout?.bgnbd).params,
      mbgnbd: fitPurchaseModel("mbgnbd", rows, holdout?.mbgnbd).params,
      gamma_gamma: fitGammaGamma(rows),
      time_unit: "day",
    },
    validation,
    rows,
  };
}

/** One customer's predictions under a brand's model. */
export interface CustomerPrediction {
  model: PurchaseModel;
  p_alive: number;
  expected_orders_90d: number;
  expected_orders_365d: number;
  /** Unrounded; the API renders it with 2 decimals. */
  predicted_clv_365d: number;
  /** Days from the customer's `T` to her expected next order; null when P(alive) < 0.5. */
  expected_wait_days: number | null;
}

/**
 * Expected spend per order of a customer: Gamma-Gamma's conditional expectation (the population
 * mean for `x` = 0); without a usable Gamma-Gamma fit (no repeat buyers, or q ≤ 1 so that the
 * mean is infinite), her own mean order-day total.
 */
export function expectedSpend(
  gammaGamma: GammaGammaParams | null,
  row: SpendRow,
  ownMean: number,
): number {
  if (!gammaGamma || gammaGamma.q <= 1) return ownMean;
  return conditionalExpectedSpend(gammaGamma, row);
}

/**
 * A customer's predictions: the selected model's P(alive) and expected orders in the next 90 and
 * 365 days, and CLV over 365 days = expected orders × expected spend, discounted by
 * 1/(1 + rate)^0.5 (the year's mid-point) for an annual `discountRate`.
 */
export function predictCustomer(
  model: FittedModel,
  row: PurchaseRow & SpendRow,
  ownMean: number,
  discountRate = 0,
): CustomerPrediction {
  const params = model[model.selected];
  const alive = pAlive(model.selected, params, row);
  const orders365 = conditionalExpectedPurchases(model.selected, params, row, 365);
  const spend = expectedSpend(model.gamma_gamma, row, ownMean);
  return {
    model: model.selected,
    p_alive: alive,
    expected_orders_90d: conditionalExpectedPurchases(model.selected, params, row, 90),
    expected_orders_365d: orders365,
    predicted_clv_365d: orders365 * spend / Math.pow(1 + discountRate, 0.5),
    expected_wait_days: alive >= 0.5 ? expectedWaitDays(params, row) : null,
  };
}
