/**
 * A brand's predictions: fitting its model from its completed orders (eligibility first), the
 * fit kept in Deno KV and `GET /cdp/insights/predictions`'s answer; each fit also replaces what
 * the customer insights (customer_predictions.ts) and segments (profile_predictions.ts) read in
 * Postgres. The model itself is pure (model_fit.ts); definitions and the eligibility rules are
 * in docs/commerce.md.
 *
 * @module
 */
import type { Sql } from "../../store/db.ts";
import { predictionsKey } from "../../store/kv_keys.ts";
import { LTV_BUCKETS } from "../insights.ts";
import { type CustomerHistory, dayText, epochDay, meanDayTotal } from "./rfm_summary.ts";
import { fitBrandModel, type FittedModel, predictCustomer, type Validation } from "./model_fit.ts";
import {
  type PredictionColumns,
  predictionColumns,
  replaceProfilePredictions,
} from "./profile_predictions.ts";
import { replacePredictionModel } from "./customer_predictions.ts";

/** Eligibility rules and the CLV discount (config.predictions). */
export interface PredictionSettings {
  minCustomers: number;
  minHistoryDays: number;
  clvDiscountRate: number;
}

/** What fitting and reading predictions need. */
export interface PredictionDeps {
  sql: Sql;
  kv: Deno.Kv;
  now: () => Date;
  settings: PredictionSettings;
  /** How the CPU-bound fit runs; a worker of its own by default. */
  runFit?: (request: FitRequest) => Promise<FitResult>;
}

/** The stored fit of a brand (KV value), as the predictions route shows it. */
export interface StoredPredictions {
  status: "ready" | "insufficient_data";
  reasons: string[];
  fitted_at: string;
  cut_off: string;
  customers: number;
  model: FittedModel | null;
  validation: Validation | null;
  distribution: { label: string; min: number; max: number | null; customer_count: number }[] | null;
  /** The repeat buyers most likely gone (dashboard), see {@linkcode AT_RISK_STORED}. */
  at_risk?: AtRiskPrediction[];
  /** Milliseconds the fit took (loading the orders included). */
  fit_ms: number;
}

/**
 * Every customer's distinct completed-order days (UTC) with each day's summed total, in contact
 * id order: what the models read of the brand's orders.
 */
export async function loadHistories(sql: Sql, brandId: string): Promise<CustomerHistory[]> {
  const rows = await sql<{ contact_id: string; day: number; total: number }[]>`
    select contact_id collate "C" as contact_id,
           ((created_at at time zone 'UTC')::date - date '1970-01-01') as day,
           sum(total)::float8 as total
    from orders
    where brand_id = ${brandId} and state = 'complete' and contact_id is not null
    group by 1, 2
    order by 1, 2`;
  const histories: CustomerHistory[] = [];
  let current = null as CustomerHistory | null;
  for (const row of rows) {
    if (current?.customer !== row.contact_id) {
      current = { customer: row.contact_id, days: [], totals: [] };
      histories.push(current);
    }
    current.days.push(row.day);
    current.totals.push(row.total);
  }
  return histories;
}

/** Why a brand's data cannot carry a fit yet (empty when it can). */
export function eligibilityReasons(
  histories: readonly CustomerHistory[],
  cutOffDay: number,
  settings: Pick<PredictionSettings, "minCustomers" | "minHistoryDays">,
): string[] {
  const reasons: string[] = [];
  if (histories.length < settings.minCustomers) {
    reasons.push(
      `${histories.length} customers with completed orders; at least ${settings.minCustomers} needed`,
    );
  }
  let first = cutOffDay;
  let repeat = false;
  for (const history of histories) {
    first = Math.min(first, history.days[0]!);
    if (history.days.length > 1) repeat = true;
  }
  const days = cutOffDay - first;
  if (days < settings.minHistoryDays) {
    reasons.push(`${days} days of order history; at least ${settings.minHistoryDays} needed`);
  }
  if (histories.length > 0 && !repeat) reasons.push("no customer has ordered on two days");
  return reasons;
}

/** What a fit reads: the histories, the cut-off day and the CLV discount rate. */
export interface FitRequest {
  histories: CustomerHistory[];
  cutOffDay: number;
  discountRate: number;
}

/** A customer of the stored at-risk list: her churn probability, LTV and predicted CLV. */
export interface AtRiskPrediction {
  customer: string;
  churn_probability: number;
  ltv: number;
  predicted_clv_365d: number;
}

/**
 * Repeat buyers kept in the stored at-risk list: ordered by churn probability (3 decimals), the
 * most valuable (LTV) first among equals. One-time buyers are left out: under BG/NBD they are
 * never at risk, and under MBG/NBD most of them would fill the list.
 */
export const AT_RISK_STORED = 50;

/**
 * What a fit produces: the model, its validation, the predicted-CLV distribution, the at-risk,
 * and every customer's predictions (written to Postgres, never kept in KV).
 */
export type FitResult =
  & Pick<StoredPredictions, "model" | "validation" | "distribution" | "at_risk">
  & { predictions?: PredictionColumns };

/** Fits the models and counts the customers' predicted CLV per LTV bucket (pure, CPU-bound). */
export function fitAndDistribute(request: FitRequest): FitResult {
  const fit = fitBrandModel(request.histories, request.cutOffDay);
  const counts = LTV_BUCKETS.map(() => 0);
  const byCustomer = new Map(request.histories.map((h) => [h.customer, h]));
  const atRisk: AtRiskPrediction[] = [];
  for (const row of fit.rows) {
    const history = byCustomer.get(row.customer)!;
    const p = predictCustomer(fit.model, row, meanDayTotal(history), request.discountRate);
    const clv = p.predicted_clv_365d;
    const bucket = LTV_BUCKETS.findIndex((b) => clv >= b.min && (b.max === null || clv < b.max));
    counts[Math.max(bucket, 0)]!++;
    if (row.x > 0) {
      let ltv = 0;
      for (let i = 0; i < history.days.length; i++) {
        if (history.days[i]! <= request.cutOffDay) ltv += history.totals[i]!;
      }
      atRisk.push({
        customer: row.customer,
        churn_probability: _round(1 - p.p_alive, 3),
        ltv: _round(ltv, 2),
        predicted_clv_365d: _round(clv, 2),
      });
    }
  }
  atRisk.sort((a, b) =>
    b.churn_probability - a.churn_probability || b.ltv - a.ltv ||
    (a.customer < b.customer ? -1 : a.customer > b.customer ? 1 : 0)
  );
  return {
    model: fit.model,
    validation: fit.validation,
    distribution: LTV_BUCKETS.map((b, i) => ({ ...b, customer_count: counts[i]! })),
    at_risk: atRisk.slice(0, AT_RISK_STORED),
    predictions: predictionColumns(
      fit.model,
      request.histories,
      request.cutOffDay,
      request.discountRate,
    ),
  };
}

/**
 * {@linkcode fitAndDistribute} in a worker of its own: a large brand's fit takes seconds of CPU,
 * which the service's event loop (requests, the queue) must not wait behind.
 */
export function fitInWorker(request: FitRequest): Promise<FitResult> {
  const worker = new Worker(new URL("./fit_worker.ts", import.meta.url), { type: "module" });
  return new Promise<FitResult>((resolve, reject) => {
    worker.onmessage = (event: MessageEvent<{ result?: FitResult; error?: string }>) => {
      if (event.data.error !== undefined) reject(new Error(`fit failed: ${event.data.error}`));
      else resolve(event.data.result!);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      reject(new Error(`fit worker failed: ${event.message}`));
    };
    worker.postMessage(request);
  }).finally(() => worker.terminate());
}

/**
 * Fits the brand's model as of today (UTC) from its completed orders and stores it, with each
 * profile's predictions (profile_predictions.ts); a brand that does not meet the eligibility
 * rules gets `insufficient_data` with its reasons instead, and its profiles lose theirs.
 */
export async function fitBrandPredictions(
  deps: PredictionDeps,
  brandId: string,
): Promise<StoredPredictions> {
  const started = performance.now();
  const now = deps.now();
  const cutOffDay = epochDay(now);
  const histories = await loadHistories(deps.sql, brandId);
  const reasons = eligibilityReasons(histories, cutOffDay, deps.settings);
  let stored: StoredPredictions;
  let columns: PredictionColumns | null = null;
  if (reasons.length > 0) {
    stored = {
      status: "insufficient_data",
      reasons,
      fitted_at: now.toISOString(),
      cut_off: dayText(cutOffDay),
      customers: histories.length,
      model: null,
      validation: null,
      distribution: null,
      fit_ms: 0,
    };
  } else {
    const fit = await (deps.runFit ?? fitInWorker)({
      histories,
      cutOffDay,
      discountRate: deps.settings.clvDiscountRate,
    });
    const { predictions, ...result } = fit;
    const converged = result.model !== null &&
      [result.model.bgnbd, result.model.mbgnbd].every((params) =>
        Object.values(params).every((v) => Number.isFinite(v) && v > 0)
      );
    if (converged) {
      columns = predictions ??
        predictionColumns(result.model!, histories, cutOffDay, deps.settings.clvDiscountRate);
    }
    stored = {
      status: converged ? "ready" : "insufficient_data",
      reasons: converged ? [] : ["the purchase models found no finite estimates on these orders"],
      fitted_at: now.toISOString(),
      cut_off: dayText(cutOffDay),
      customers: histories.length,
      ...(converged ? result : { model: null, validation: null, distribution: null }),
      fit_ms: 0,
    };
  }
  // Postgres first (the model the customer insights read, every profile's row, one
  // transaction): a failure leaves the previous fit in place everywhere, and the job retries.
  const ready = columns && stored.model && { model: stored.model, fittedAt: now, columns };
  await deps.sql.begin(async (tx) => {
    await replacePredictionModel(tx, brandId, ready);
    await replaceProfilePredictions(tx, brandId, ready);
  });
  stored.fit_ms = Math.round(performance.now() - started);
  await deps.kv.set(predictionsKey(brandId), stored);
  return stored;
}

/** The brand's stored fit; null before its first. */
export async function readBrandPredictions(
  kv: Deno.Kv,
  brandId: string,
): Promise<StoredPredictions | null> {
  return (await kv.get<StoredPredictions>(predictionsKey(brandId))).value;
}

const _round = (value: number, digits: number) => Number(value.toFixed(digits));

function _params<T extends object>(params: T): T {
  return Object.fromEntries(
    Object.entries(params).map(([k, v]) => [k, typeof v === "number" ? _round(v, 6) : v]),
  ) as T;
}

/** `GET /cdp/insights/predictions`'s answer from the stored fit (`pending` before the first). */
export function predictionsView(stored: StoredPredictions | null) {
  if (!stored) {
    return {
      status: "pending" as const,
      reasons: ["no fit yet"],
      fitted_at: null,
      cut_off: null,
      customers: 0,
      model: null,
      validation: null,
      distribution: null,
    };
  }
  const { model, validation } = stored;
  return {
    status: stored.status,
    reasons: stored.reasons,
    fitted_at: stored.fitted_at,
    cut_off: stored.cut_off,
    customers: stored.customers,
    model: model && {
      selected: model.selected,
      bgnbd: _params(model.bgnbd),
      mbgnbd: _params(model.mbgnbd),
      gamma_gamma: model.gamma_gamma && _params(model.gamma_gamma),
      time_unit: model.time_unit,
    },
    validation: validation && {
      holdout_days: validation.holdout_days,
      holdout_from: validation.holdout_from,
      predicted_repeat_orders: _round(validation.predicted_repeat_orders, 2),
      actual_repeat_orders: validation.actual_repeat_orders,
      by_frequency: validation.by_frequency.map((g) => ({
        x: g.x,
        customers: g.customers,
        actual: g.actual,
        predicted: _round(g.predicted, 2),
        predicted_bgnbd: _round(g.predicted_bgnbd, 2),
        predicted_mbgnbd: _round(g.predicted_mbgnbd, 2),
      })),
      bgnbd_error: _round(validation.bgnbd_error, 2),
      mbgnbd_error: _round(validation.mbgnbd_error, 2),
    },
    distribution: stored.distribution,
  };
}
