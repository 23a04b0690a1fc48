/**
 * The insights page: LTV distribution, RFM groups, top products, revenue by month, customers at
 * risk and event volume, each a chart with its formula and a table of the same numbers, read
 * through the functions the `/cdp/insights/*` routes call.
 *
 * @module
 */
import type { AppDeps } from "../../lib/http/app_env.ts";
import {
  atRiskCustomers,
  brandLtv,
  brandProducts,
  brandRfm,
  revenueByMonth,
  RFM_TIERS,
} from "../../lib/commerce/insights.ts";
import { EVENT_VOLUME_DAYS, eventVolumeByDay } from "../../lib/engine/event_volume.ts";
import { readBrandPredictions } from "../../lib/commerce/predictions/brand_predictions.ts";
import { PredictionCards, predictionCardsData } from "./predictions_cards.tsx";
import { ChartCard, DataTable, Layout } from "./layout.tsx";
import { type PageContext, SESSION_PARAM } from "./page_context.ts";

/** Top products shown (the API's default page). */
export const TOP_PRODUCTS = 10;
/** At-risk customers per page of the table. */
export const AT_RISK_PAGE = 10;

/** Renders the insights page of the brand, the at-risk table from `offset`. */
export async function insightsPage(
  deps: AppDeps,
  page: PageContext,
  input: { scope: string; offset: number },
) {
  const brandId = page.brand.brandId;
  const freshness = {
    now: deps.now(),
    maxStalenessSeconds: deps.config.insightsMaxStalenessSeconds,
  };
  const [ltv, rfm, products, revenue, atRisk, volume, predictions] = await Promise.all([
    brandLtv(deps.sql, brandId, freshness),
    brandRfm(deps.sql, brandId, freshness),
    brandProducts(deps.sql, brandId, TOP_PRODUCTS, freshness),
    revenueByMonth(deps.sql, brandId, freshness),
    atRiskCustomers(deps.sql, brandId, { limit: AT_RISK_PAGE, offset: input.offset }, freshness),
    eventVolumeByDay(deps.sql, input.scope, { now: freshness.now, days: EVENT_VOLUME_DAYS }),
    readBrandPredictions(deps.kv, brandId).then((stored) =>
      predictionCardsData(deps.sql, brandId, stored)
    ),
  ]);
  const currency = ltv.currency_code ?? "";
  const tierName = (tier: string) => tier.replaceAll("_", " ");
  return (
    <Layout title="Insights" page={page} active="insights">
      <h1>Insights</h1>
      <p class="subdued">
        {page.brand.name}: {ltv.customer_count} customers with completed orders, total revenue{" "}
        {ltv.total_revenue} {currency}, average LTV {ltv.average_ltv} {currency}.
      </p>
      <form method="get" action="/app/customers">
        <input type="hidden" name={SESSION_PARAM} value={page.token} />
        <input type="text" name="q" placeholder="Find a customer: email, phone or id" />{" "}
        <button type="submit" class="secondary">Open record</button>
      </form>
      <div class="grid">
        <ChartCard
          id="ltv"
          title="Lifetime value distribution"
          formula="Customers by LTV, the sum of their completed orders (dollars; lower bound inclusive). Source: GET /cdp/insights/ltv."
          svg={page.charts.bar({
            labels: ltv.distribution.map((b) => b.label),
            values: ltv.distribution.map((b) => b.customer_count),
          })}
        >
          <DataTable
            id="ltv"
            caption="Customers per LTV bucket"
            columns={[{ label: "LTV bucket" }, { label: "Customers", numeric: true }]}
            rows={ltv.distribution.map((b) => [b.label, b.customer_count])}
          />
        </ChartCard>
        <PredictionCards
          page={page}
          data={predictions}
          currency={currency}
          ltv={ltv.distribution}
        />
        <ChartCard
          id="rfm"
          title="RFM groups"
          formula="Recency, frequency and monetary quintiles (1-5) of completed orders, mapped to Shopify's RFM groups; revenue is the group's LTV sum. Source: GET /cdp/insights/rfm."
          svg={page.charts.treemap({
            labels: RFM_TIERS.map(tierName),
            values: RFM_TIERS.map((tier) => rfm.tiers[tier]),
          })}
        >
          <DataTable
            id="rfm"
            caption="Customers and revenue per RFM group"
            columns={[
              { label: "Group" },
              { label: "Customers", numeric: true },
              { label: `Revenue ${currency}`, numeric: true },
            ]}
            rows={RFM_TIERS.map((
              tier,
            ) => [tierName(tier), rfm.tiers[tier], rfm.tier_revenue[tier]])}
          />
        </ChartCard>
        <ChartCard
          id="products"
          title="Top products"
          formula="Revenue = sum of price x quantity over completed-order line items. Source: GET /cdp/insights/products."
          svg={page.charts.bar({
            labels: products.map((p) => p.title),
            values: products.map((p) => Number(p.revenue)),
            horizontal: true,
          })}
        >
          <DataTable
            id="products"
            caption="Top products by revenue"
            columns={[
              { label: "Product" },
              { label: `Revenue ${currency}`, numeric: true },
              { label: "Quantity", numeric: true },
              { label: "Orders", numeric: true },
              { label: "Customers", numeric: true },
            ]}
            rows={products.map((p) => [
              p.title,
              p.revenue,
              p.quantity,
              p.order_count,
              p.customer_count,
            ])}
          />
        </ChartCard>
        <ChartCard
          id="revenue"
          title="Revenue by month"
          formula="Sum of completed orders' totals per UTC month. Source: GET /cdp/insights/revenue."
          svg={page.charts.line({
            labels: revenue.map((m) => m.month),
            values: revenue.map((m) => Number(m.revenue)),
          })}
        >
          <details>
            <summary>Data table</summary>
            <DataTable
              id="revenue"
              caption="Completed-order revenue per month"
              columns={[
                { label: "Month" },
                { label: `Revenue ${currency}`, numeric: true },
                { label: "Orders", numeric: true },
              ]}
              rows={revenue.map((m) => [m.month, m.revenue, m.order_count])}
            />
          </details>
        </ChartCard>
        <ChartCard
          id="events"
          title="Event volume, last 30 days"
          formula="Events received per UTC day (today included). Source: GET /cdp/insights/events."
          svg={page.charts.line({
            labels: volume.map((d) => d.day.slice(5)),
            values: volume.map((d) => d.events),
          })}
        >
          <details>
            <summary>Data table</summary>
            <DataTable
              id="events"
              caption="Events per day"
              columns={[{ label: "Day" }, { label: "Events", numeric: true }]}
              rows={volume.map((d) => [d.day, d.events])}
            />
          </details>
        </ChartCard>
        <section class="card" data-card="at-risk">
          <h2>Customers at risk</h2>
          <p class="formula">
            Days since the last order at least twice the median days between orders (the customer's,
            else the brand's); most valuable first. Source: GET /cdp/insights/at-risk.
          </p>
          <DataTable
            id="at-risk"
            caption={`${atRisk.total} customers at risk`}
            columns={[
              { label: "Customer" },
              { label: `LTV ${currency}`, numeric: true },
              { label: "Orders", numeric: true },
              { label: "Days since order", numeric: true },
              { label: "Risk score", numeric: true },
            ]}
            rows={atRisk.list.map((c) => [
              <a
                href={page.link(
                  `/app/customers/${
                    encodeURIComponent(c.email ?? c.shopify_customer_id ?? c.contact_id)
                  }`,
                )}
              >
                {c.email ?? c.shopify_customer_id ?? c.contact_id}
              </a>,
              c.ltv,
              c.order_count,
              c.days_since_last_order,
              c.at_risk_score,
            ])}
          />
          <div class="pager">
            {input.offset > 0 && (
              <a
                href={page.link("/app/insights", {
                  offset: Math.max(0, input.offset - AT_RISK_PAGE),
                })}
              >
                Previous
              </a>
            )}
            <span class="subdued">
              {atRisk.total === 0
                ? "None"
                : `${input.offset + 1}-${input.offset + atRisk.list.length} of ${atRisk.total}`}
            </span>
            {input.offset + AT_RISK_PAGE < atRisk.total && (
              <a href={page.link("/app/insights", { offset: input.offset + AT_RISK_PAGE })}>Next</a>
            )}
          </div>
        </section>
      </div>
    </Layout>
  );
}
