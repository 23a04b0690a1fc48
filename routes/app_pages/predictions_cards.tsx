/**
 * The insights page's prediction cards: predicted 365-day CLV beside historic LTV, the holdout
 * calibration chart (actual and both models' predicted repeat orders per calibration frequency)
 * and the repeat buyers most likely gone, from the brand's stored fit (GET
 * /cdp/insights/predictions). A brand without a ready fit sees why instead.
 *
 * @module
 */
import type { Sql } from "../../lib/store/db.ts";
import {
  predictionsView,
  type StoredPredictions,
} from "../../lib/commerce/predictions/brand_predictions.ts";
import { ChartCard, DataTable } from "./layout.tsx";
import type { PageContext } from "./page_context.ts";

/** The at-risk customers shown. */
export const PREDICTED_AT_RISK_SHOWN = 10;

/** The stored fit and what the cards show of its at-risk customers' contacts. */
export interface PredictionCardsData {
  stored: StoredPredictions | null;
  contacts: Map<string, { email: string | null; shopify_customer_id: string | null }>;
}

/** Reads the contacts of the stored at-risk list (one query, by id). */
export async function predictionCardsData(
  sql: Sql,
  brandId: string,
  stored: StoredPredictions | null,
): Promise<PredictionCardsData> {
  const ids = (stored?.at_risk ?? []).slice(0, PREDICTED_AT_RISK_SHOWN).map((c) => c.customer);
  const rows = ids.length === 0 ? [] : await sql<
    { id: string; email: string | null; shopify_customer_id: string | null }[]
  >`
    select id, email, shopify_customer_id from contacts
    where brand_id = ${brandId} and id = any(${ids}::text[])`;
  return { stored, contacts: new Map(rows.map((r) => [r.id, r])) };
}

/** The cards (inside the page's grid). */
export function PredictionCards(
  props: {
    page: PageContext;
    data: PredictionCardsData;
    currency: string;
    ltv: { label: string; customer_count: number }[];
  },
) {
  const { page, data, currency } = props;
  const view = predictionsView(data.stored);
  if (view.status !== "ready" || !view.model || !view.distribution) {
    return (
      <section class="card" data-card="predictions">
        <h2>Predicted lifetime value</h2>
        <p class="subdued">
          {view.status === "pending"
            ? "Predictions are computed daily and after imports; none yet."
            : `Not enough data for predictions: ${view.reasons.join("; ")}.`}
        </p>
      </section>
    );
  }
  const distribution = view.distribution;
  const validation = view.validation;
  const modelName = view.model.selected === "mbgnbd" ? "MBG/NBD" : "BG/NBD";
  const atRisk = (data.stored?.at_risk ?? []).slice(0, PREDICTED_AT_RISK_SHOWN);
  return (
    <>
      <ChartCard
        id="predicted-clv"
        title="Predicted CLV (next 365 days) beside LTV"
        formula={`Customers per bucket of historic LTV and of predicted 365-day CLV: expected orders (${modelName}) x expected spend per order (Gamma-Gamma), as of ${view.cut_off}. Source: GET /cdp/insights/predictions.`}
        svg={page.charts.grouped({
          labels: distribution.map((b) => b.label),
          series: [
            { name: "LTV so far", values: props.ltv.map((b) => b.customer_count) },
            { name: "Predicted CLV", values: distribution.map((b) => b.customer_count) },
          ],
        })}
      >
        <DataTable
          id="predicted-clv"
          caption="Customers per LTV and predicted-CLV bucket"
          columns={[
            { label: `Bucket ${currency}` },
            { label: "LTV so far", numeric: true },
            { label: "Predicted CLV", numeric: true },
          ]}
          rows={distribution.map((b, i) => [
            b.label,
            props.ltv[i]?.customer_count ?? 0,
            b.customer_count,
          ])}
        />
      </ChartCard>
      {validation && (
        <ChartCard
          id="calibration"
          title="Model check: predicted vs actual repeat orders"
          formula={`Both models refitted on the orders before ${validation.holdout_from} predict each customer's repeat orders in the ${validation.holdout_days} days after, grouped by repeat orders before; error = sum of |predicted - actual| over the groups. BG/NBD ${validation.bgnbd_error}, MBG/NBD ${validation.mbgnbd_error}: ${modelName} is used. Source: GET /cdp/insights/predictions.`}
          svg={page.charts.grouped({
            labels: validation.by_frequency.map((g) => g.x),
            series: [
              { name: "Actual", values: validation.by_frequency.map((g) => g.actual) },
              { name: "BG/NBD", values: validation.by_frequency.map((g) => g.predicted_bgnbd) },
              { name: "MBG/NBD", values: validation.by_frequency.map((g) => g.predicted_mbgnbd) },
            ],
          })}
        >
          <DataTable
            id="calibration"
            caption="Holdout repeat orders per calibration frequency"
            columns={[
              { label: "Repeat orders before" },
              { label: "Customers", numeric: true },
              { label: "Actual", numeric: true },
              { label: "BG/NBD", numeric: true },
              { label: "MBG/NBD", numeric: true },
            ]}
            rows={validation.by_frequency.map((g) => [
              g.x,
              g.customers,
              g.actual,
              g.predicted_bgnbd,
              g.predicted_mbgnbd,
            ])}
          />
        </ChartCard>
      )}
      <section class="card" data-card="churn-risk">
        <h2>Most likely to churn</h2>
        <p class="formula">
          Repeat buyers by churn probability = 1 - P(alive) under{" "}
          {modelName}, the most valuable first among equals, as of{" "}
          {view.cut_off}. Source: GET /cdp/insights/predictions and each customer's insights.
        </p>
        <DataTable
          id="churn-risk"
          caption={`${atRisk.length} customers`}
          columns={[
            { label: "Customer" },
            { label: "Churn probability", numeric: true },
            { label: `LTV ${currency}`, numeric: true },
            { label: `Predicted CLV ${currency}`, numeric: true },
          ]}
          rows={atRisk.map((c) => {
            const contact = data.contacts.get(c.customer);
            const name = contact?.email ?? contact?.shopify_customer_id ?? c.customer;
            return [
              <a href={page.link(`/app/customers/${encodeURIComponent(name)}`)}>{name}</a>,
              c.churn_probability.toFixed(3),
              c.ltv.toFixed(2),
              c.predicted_clv_365d.toFixed(2),
            ];
          })}
        />
      </section>
    </>
  );
}
