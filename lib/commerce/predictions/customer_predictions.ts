/**
 * One customer's predictions for her insights (`insights.predicted`), and the brand's model they
 * are computed with, kept in Postgres (`prediction_models`) so that the insights' own statements
 * read it (with her summary row) and her completed order days (from the scan of her orders that
 * finds her top products): no statement of its own. The arithmetic (P(alive), expected orders,
 * CLV, the expected wait) is model_fit.ts's, at request time, so a new order counts at once under
 * the last fit's parameters.
 *
 * @module
 */
import { jsonParam, type Tx } from "../../store/db.ts";
import type { FittedModel } from "./model_fit.ts";
import { predictCustomer } from "./model_fit.ts";
import { type CustomerHistory, epochDay, meanDayTotal, rfmRow } from "./rfm_summary.ts";

/** `insights.predicted` of one customer. */
export interface PredictedInsights {
  model: "bgnbd" | "mbgnbd";
  p_alive: number;
  expected_orders_90d: number;
  expected_orders_365d: number;
  predicted_clv_365d: string;
  expected_next_order_at: string | null;
}

const _round = (value: number, digits: number) => Number(value.toFixed(digits));

/**
 * Replaces the brand's model (none when null: its fit is not ready), in the caller's transaction
 * (the one that replaces its profile predictions).
 */
export async function replacePredictionModel(
  tx: Tx,
  brandId: string,
  fit: { model: FittedModel; fittedAt: Date } | null,
): Promise<void> {
  if (!fit) {
    await tx`delete from prediction_models where brand_id = ${brandId}`;
    return;
  }
  await tx`
    insert into prediction_models (brand_id, model, fitted_at)
    values (${brandId}, ${jsonParam(tx, fit.model)}, ${fit.fittedAt})
    on conflict (brand_id) do update set model = excluded.model, fitted_at = excluded.fitted_at`;
}

/**
 * One customer's predictions as of `now` from her completed order days and their totals (`T` to
 * today) under the brand's model; null without a completed order.
 */
export function predictedInsights(
  model: FittedModel,
  history: CustomerHistory,
  now: Date,
  clvDiscountRate: number,
): PredictedInsights | null {
  if (history.days.length === 0) return null;
  // An order dated after today (clock skew) counts as today's.
  const today = Math.max(epochDay(now), history.days.at(-1)!);
  const p = predictCustomer(model, rfmRow(history, today)!, meanDayTotal(history), clvDiscountRate);
  return {
    model: p.model,
    p_alive: _round(p.p_alive, 4),
    expected_orders_90d: _round(p.expected_orders_90d, 4),
    expected_orders_365d: _round(p.expected_orders_365d, 4),
    predicted_clv_365d: p.predicted_clv_365d.toFixed(2),
    expected_next_order_at: p.expected_wait_days === null
      ? null
      : new Date(now.getTime() + p.expected_wait_days * 86_400_000).toISOString(),
  };
}

/** A customer's insights with `predicted` added and `churn.probability` = 1 − P(alive). */
export function withPredictions<T extends { churn: object | null }>(
  insights: T,
  predicted: PredictedInsights | null,
) {
  return {
    ...insights,
    predicted,
    churn: insights.churn &&
      {
        ...insights.churn,
        probability: predicted ? _round(1 - predicted.p_alive, 4) : null,
      },
  };
}
