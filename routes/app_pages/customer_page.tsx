/**
 * The customer record page: one customer's unified record (profile, orders, LTV, RFM, churn
 * risk, segments), read through the functions the `/cdp/customers/{identifier}` routes call.
 *
 * @module
 */
import type { AppDeps } from "../../lib/http/app_env.ts";
import type { BrandConcurrency } from "../../lib/http/brand_concurrency.ts";
import { customerRecord, resolveCustomer } from "../../lib/commerce/customers.ts";
import { customerInsights } from "../../lib/commerce/insights.ts";
import { listOrders } from "../../lib/commerce/reads.ts";
import { HttpError } from "../../lib/http/errors.ts";
import { Card, ChartCard, DataTable, Layout } from "./layout.tsx";
import type { PageContext } from "./page_context.ts";

/** Orders listed on the page (newest first), as the API's first page of that size. */
export const CUSTOMER_ORDERS = 20;

/**
 * Renders the customer the identifier resolves to; 404 when neither store knows it. Its segments
 * are evaluated as the API's record evaluates them (on the brand's share of `heavyReads`, within
 * the time budget); those not decided are listed as unknown.
 */
export async function customerPage(
  deps: AppDeps,
  page: PageContext,
  input: { scope: string; identifier: string; heavyReads: BrandConcurrency },
) {
  const brand = { brandId: page.brand.brandId, scope: input.scope };
  const now = deps.now();
  const resolved = await resolveCustomer(deps.sql, brand, input.identifier);
  if (!resolved) throw new HttpError(404, "not_found", "Customer not found");
  const freshness = { now, maxStalenessSeconds: deps.config.insightsMaxStalenessSeconds };
  const [record, insights, orders] = await Promise.all([
    customerRecord(deps.sql, brand, input.identifier, resolved, now, {
      permit: () => input.heavyReads.tryAcquire(brand.brandId),
      timeoutMs: deps.config.queryTimeoutMs,
    }),
    customerInsights(deps.sql, brand.brandId, resolved.contactId, freshness),
    listOrders(deps.sql, brand.brandId, { contactId: resolved.contactId }, {
      limit: CUSTOMER_ORDERS,
      offset: 0,
    }),
  ]);
  const identity = (record.profile?.identity ?? {}) as Record<string, unknown>;
  const name = [identity.firstName, identity.lastName].filter((v) => typeof v === "string")
    .join(" ");
  const title = name || (identity.email as string | undefined) || input.identifier;
  const chronological = [...orders.list].reverse();
  const currency = insights.currency_code ?? "";
  return (
    <Layout title={title} page={page} active={null}>
      <h1>{title}</h1>
      <p class="subdued">
        Matched by {record.matched_by}
        {record.profile ? `; profile ${record.profile.id}` : "; no profile"}
      </p>
      <div class="stats" data-table="summary">
        <Stat label={`LTV ${currency}`} id="ltv" value={insights.ltv} />
        <Stat label="Orders" id="order_count" value={insights.order_count} />
        <Stat label={`AOV ${currency}`} id="aov" value={insights.aov} />
        <Stat
          label="RFM group"
          id="rfm"
          value={insights.rfm?.tier.replaceAll("_", " ") ?? "none"}
        />
        <Stat
          label="Churn risk score"
          id="churn"
          value={insights.churn ? insights.churn.at_risk_score : "none"}
        />
      </div>
      <div class="grid">
        <ChartCard
          id="orders"
          title="Orders"
          formula={`Order totals of the ${CUSTOMER_ORDERS} latest orders, all states, oldest left. Source: GET /cdp/customers/{identifier}/orders.`}
          svg={page.charts.bar({
            labels: chronological.map((o) => o.created_at.slice(0, 10)),
            values: chronological.map((o) => Number(o.total)),
          })}
        >
          <DataTable
            id="orders"
            caption={`${orders.total} orders`}
            columns={[
              { label: "Order" },
              { label: "Date" },
              { label: "State" },
              { label: "Total", numeric: true },
            ]}
            rows={orders.list.map((o) => [
              o.number,
              o.created_at.slice(0, 10),
              o.state,
              `${o.total} ${o.currency_code}`,
            ])}
          />
        </ChartCard>
        <ChartCard
          id="top-products"
          title="Top products"
          formula="The customer's products by completed-order revenue (price x quantity). Source: GET /cdp/customers/{identifier}/insights."
          svg={page.charts.bar({
            labels: insights.top_products.map((p) => p.title),
            values: insights.top_products.map((p) => Number(p.revenue)),
            horizontal: true,
          })}
        >
          <DataTable
            id="top-products"
            caption="Top products"
            columns={[
              { label: "Product" },
              { label: "Revenue", numeric: true },
              { label: "Quantity", numeric: true },
            ]}
            rows={insights.top_products.map((p) => [p.title, p.revenue, p.quantity])}
          />
        </ChartCard>
        <Card title="RFM and churn" id="rfm">
          <DataTable
            id="rfm"
            caption="Scores over completed orders"
            columns={[{ label: "Measure" }, { label: "Value", numeric: true }]}
            rows={[
              ["Recency score", insights.rfm?.recency_score ?? "-"],
              ["Frequency score", insights.rfm?.frequency_score ?? "-"],
              ["Monetary score", insights.rfm?.monetary_score ?? "-"],
              ["Days since last order", insights.churn?.days_since_last_order ?? "-"],
              ["Median days between orders", insights.churn?.median_inter_order_days ?? "-"],
              ["At risk", insights.churn ? (insights.churn.at_risk ? "yes" : "no") : "-"],
            ]}
          />
        </Card>
        <Card title="Profile" id="profile">
          <DataTable
            id="profile"
            caption="Identity and behaviour"
            columns={[{ label: "Field" }, { label: "Value" }]}
            rows={[
              ...Object.entries(identity).map(([k, v]) => [k, String(v)]),
              ["Visits", String(record.profile?.behavior.nb_of_visits ?? "-")],
              ["Last visit", record.profile?.behavior.last_visit ?? "-"],
              ["Subscription", record.subscription.status],
              [
                "Segments",
                record.profile?.segments.length || record.profile?.segments_unknown.length
                  ? ""
                  : "none",
              ],
            ]}
          />
          <ul data-list="segments">
            {(record.profile?.segments ?? []).map((id) => (
              <li>
                <a href={page.link(`/app/segments/${encodeURIComponent(id)}`)}>{id}</a>
              </li>
            ))}
          </ul>
          {record.profile?.segments_unknown.length
            ? (
              <>
                <p class="subdued">
                  Not decided in time, or while the brand's other heavy reads held its share (reload
                  to evaluate again):
                </p>
                <ul data-list="segments-unknown">
                  {record.profile.segments_unknown.map((id) => (
                    <li>
                      <a href={page.link(`/app/segments/${encodeURIComponent(id)}`)}>{id}</a>
                    </li>
                  ))}
                </ul>
              </>
            )
            : null}
        </Card>
      </div>
    </Layout>
  );
}

function Stat(props: { label: string; id: string; value: string | number }) {
  return (
    <div class="stat" data-stat={props.id}>
      <div class="subdued">{props.label}</div>
      <div class="value">{props.value}</div>
    </div>
  );
}
