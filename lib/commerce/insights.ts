/**
 * Insights over completed orders only: lifetime value, RFM, top products and churn, per customer
 * and per brand. Every amount is exact (numeric) and rendered with 2 decimals. Formulas are in
 * docs/commerce.md.
 *
 * @module
 */
import type postgres from "postgres";
import type { Sql } from "../store/db.ts";
import { countToWindow } from "../store/offset_window.ts";
import { money } from "./order_lines.ts";
import { currentSnapshot, type Freshness, type InsightSnapshot } from "./summaries.ts";
import type { FittedModel } from "./predictions/model_fit.ts";
import { predictedInsights, withPredictions } from "./predictions/customer_predictions.ts";

type _Fragment = postgres.PendingQuery<postgres.Row[]>;

/** Shopify's customer RFM groups. */
export const RFM_TIERS = [
  "champions",
  "loyal",
  "active",
  "new",
  "promising",
  "needs_attention",
  "at_risk",
  "almost_lost",
  "previously_loyal",
  "dormant",
] as const;
export type RfmTier = (typeof RFM_TIERS)[number];

/**
 * The tier of a recency score (rows, 5 = most recent) and a frequency-monetary score (columns,
 * FM = round((F + M) / 2), 1..5). Every one of the 25 cells is named.
 */
export const RFM_TIER_MAP: Record<number, readonly RfmTier[]> = {
  5: ["new", "promising", "active", "champions", "champions"],
  4: ["promising", "promising", "active", "loyal", "champions"],
  3: ["needs_attention", "needs_attention", "needs_attention", "loyal", "loyal"],
  2: ["almost_lost", "almost_lost", "at_risk", "at_risk", "at_risk"],
  1: ["dormant", "dormant", "dormant", "previously_loyal", "previously_loyal"],
};

/** The tier of R, F and M scores. */
export function rfmTier(r: number, f: number, m: number): RfmTier {
  return RFM_TIER_MAP[r]![Math.floor((f + m + 1) / 2) - 1]!;
}

/** LTV buckets (dollars; min inclusive, max exclusive). */
export const LTV_BUCKETS = [
  { label: "0-100", min: 0, max: 100 },
  { label: "100-250", min: 100, max: 250 },
  { label: "250-500", min: 250, max: 500 },
  { label: "500-1000", min: 500, max: 1000 },
  { label: "1000+", min: 1000, max: null },
] as const;

/** Days since a date, whole days. */
function _daysSince(date: Date, now: Date): number {
  return Math.floor((now.getTime() - date.getTime()) / 86_400_000);
}

/** A churn verdict: at risk past twice the cadence (the customer's, else the brand's). */
function _churn(daysSince: number, own: number | null, brand: number | null) {
  const cadence = own ?? brand;
  const score = cadence && cadence > 0 ? Math.round((daysSince / (2 * cadence)) * 100) / 100 : 0;
  return {
    days_since_last_order: daysSince,
    median_inter_order_days: own === null ? null : Math.round(own * 10) / 10,
    brand_median_inter_order_days: brand === null ? null : Math.round(brand * 10) / 10,
    at_risk_score: score,
    at_risk: score >= 1,
  };
}

/** A product's figures as the product queries return them (revenue as exact text). */
type _ProductRow = {
  product_id: string;
  title: string;
  quantity: number;
  order_count: number;
  revenue: string;
  customer_count: number;
  repeat_purchase_rate: number;
};

/** A customer's churn verdict (`insights.churn`). */
export type Churn = ReturnType<typeof _churn>;

/** A customer's insights (`insights` of the route, without its predictions). */
export interface CustomerInsights {
  ltv: string;
  order_count: number;
  aov: string;
  first_order_at: string | null;
  last_order_at: string | null;
  currency_code: string | null;
  rfm: {
    recency_score: number;
    frequency_score: number;
    monetary_score: number;
    tier: RfmTier;
    last_order_at: string;
    order_count: number;
    ltv: string;
  } | null;
  top_products: _ProductRow[];
  churn: Churn | null;
}

/** A customer's insights with `predicted` and `churn.probability`. */
export type PredictedCustomerInsights = ReturnType<typeof withPredictions<CustomerInsights>>;

/** Her customer_summaries row; with predictions asked, the brand's model beside it. */
type _SummaryRow = {
  order_count: number;
  spend: string;
  aov: string;
  first_order_at: Date;
  last_order_at: Date;
  median_gap: number | null;
  r: number;
  f: number;
  m: number;
  currency_code: string | null;
};

/**
 * Her summary row (null without one) and, when asked, the brand's model (a primary-key lookup in
 * the same statement; null without a ready fit).
 */
async function _summaryAndModel(
  sql: Sql,
  brandId: string,
  contactId: string,
  withModel: boolean,
): Promise<{ summary: _SummaryRow | null; model: FittedModel | null }> {
  const columns = sql`
    s.order_count, s.spend::text as spend, round(s.spend / s.order_count, 2)::text as aov,
    s.first_order_at, s.last_order_at, s.median_gap, s.r, s.f, s.m, s.currency_code`;
  if (!withModel) {
    const [summary] = await sql<_SummaryRow[]>`
      select ${columns} from customer_summaries s
      where s.brand_id = ${brandId} and s.contact_id = ${contactId}`;
    return { summary: summary ?? null, model: null };
  }
  // One row whether or not she has a summary row (a stale snapshot may not have her yet).
  const [row] = await sql<(Partial<_SummaryRow> & { model: FittedModel | null })[]>`
    select ${columns}, m.model
    from (values (1)) one
    left join customer_summaries s on s.brand_id = ${brandId} and s.contact_id = ${contactId}
    left join prediction_models m on m.brand_id = ${brandId}`;
  const { model, ...summary } = row!;
  return { summary: summary.order_count == null ? null : summary as _SummaryRow, model };
}

/** Her top 5 products by completed-order revenue, with the brand-wide reach: over `o`. */
function _topProducts(sql: Sql, brandId: string, from: _Fragment, where: _Fragment): _Fragment {
  return sql`
    select ranked.product_id, ranked.title, ranked.quantity, ranked.order_count,
           ranked.revenue::text as revenue, coalesce(p.customer_count, 0) as customer_count,
           coalesce(p.repeat_purchase_rate, 0) as repeat_purchase_rate
    from (
      select li.product_id, max(li.title) as title, sum(li.quantity)::int as quantity,
             count(distinct o.id)::int as order_count, sum(li.price * li.quantity) as revenue
      from ${from}
      cross join lateral jsonb_to_recordset(o.line_items)
        as li(product_id text, title text, quantity integer, price numeric)
      where ${where} and li.product_id is not null
      group by li.product_id
    ) ranked
    left join product_summaries p on p.brand_id = ${brandId} and p.product_id = ranked.product_id
    order by ranked.revenue desc, ranked.product_id
    limit 5`;
}

/**
 * A customer's top products and, when asked, her completed order days (UTC calendar days,
 * ascending) with each day's summed total, from the same scan of her completed orders.
 */
async function _customerOrders(
  sql: Sql,
  brandId: string,
  contactId: string,
  withDays: boolean,
): Promise<{ products: _ProductRow[]; days: number[]; totals: number[] }> {
  if (!withDays) {
    const rows = await sql<_ProductRow[]>`${
      _topProducts(
        sql,
        brandId,
        sql`orders o`,
        sql`o.contact_id = ${contactId} and o.brand_id = ${brandId} and o.state = 'complete'`,
      )
    }`;
    return {
      products: rows.map((r) => ({ ...r, revenue: money(r.revenue) })),
      days: [],
      totals: [],
    };
  }
  // One row per product (at least one: no product gives nulls), her days on each.
  const rows = await sql<(_ProductRow & { days: number[]; totals: number[] })[]>`
    with o as materialized (
      select id, created_at, total, line_items from orders
      where contact_id = ${contactId} and brand_id = ${brandId} and state = 'complete'
    ), h as (
      select coalesce(array_agg(day order by day), '{}') as days,
             coalesce(array_agg(total order by day), '{}') as totals
      from (
        select ((created_at at time zone 'UTC')::date - date '1970-01-01') as day,
               sum(total)::float8 as total
        from o group by 1
      ) d
    ), top as (${_topProducts(sql, brandId, sql`o`, sql`true`)})
    select top.*, h.days, h.totals from h left join top on true
    order by top.revenue::numeric desc, top.product_id`;
  const products: _ProductRow[] = [];
  for (const { days: _days, totals: _totals, ...r } of rows) {
    if (r.product_id !== null) products.push({ ...r, revenue: money(r.revenue) });
  }
  return { products, days: rows[0]!.days, totals: rows[0]!.totals };
}

/**
 * Spec 2.9: a customer's insights; zeros and nulls (never 404) without completed orders. With
 * `predictions` (the brand's settings), also `predicted` (null without a ready model or a
 * completed order) and `churn.probability`: the model is read with her summary row and her order
 * days with her top products, so they add no statement.
 */
export function customerInsights(
  sql: Sql,
  brandId: string,
  contactId: string | null,
  freshness: Freshness,
): Promise<CustomerInsights>;
export function customerInsights(
  sql: Sql,
  brandId: string,
  contactId: string | null,
  freshness: Freshness,
  predictions: { clvDiscountRate: number },
): Promise<PredictedCustomerInsights>;
export async function customerInsights(
  sql: Sql,
  brandId: string,
  contactId: string | null,
  freshness: Freshness,
  predictions?: { clvDiscountRate: number },
): Promise<CustomerInsights | PredictedCustomerInsights> {
  const snapshot = contactId ? await currentSnapshot(sql, brandId, freshness) : null;
  const { summary, model } = contactId
    ? await _summaryAndModel(sql, brandId, contactId, predictions !== undefined)
    : { summary: null, model: null };
  // Without a summary row but with a model, her orders are still read: a stale snapshot may not
  // have her latest orders, the predictions always do.
  const orders = contactId && (summary || model)
    ? await _customerOrders(sql, brandId, contactId, model !== null)
    : null;
  const insights = summary
    ? _insights(summary, orders!.products, snapshot!, freshness.now)
    : _emptyInsights();
  if (!predictions) return insights;
  const predicted = model && orders
    ? predictedInsights(
      model,
      { customer: contactId!, days: orders.days, totals: orders.totals },
      freshness.now,
      predictions.clvDiscountRate,
    )
    : null;
  return withPredictions(insights, predicted);
}

/** The insights of a customer without completed orders. */
function _emptyInsights(): CustomerInsights {
  return {
    ltv: "0.00",
    order_count: 0,
    aov: "0.00",
    first_order_at: null,
    last_order_at: null,
    currency_code: null,
    rfm: null,
    top_products: [],
    churn: null,
  };
}

/** The insights of a customer with her summary row. */
function _insights(
  row: _SummaryRow,
  products: _ProductRow[],
  snapshot: InsightSnapshot,
  now: Date,
): CustomerInsights {
  const ltv = money(row.spend);
  return {
    ltv,
    order_count: row.order_count,
    aov: money(row.aov),
    first_order_at: row.first_order_at.toISOString(),
    last_order_at: row.last_order_at.toISOString(),
    currency_code: row.currency_code,
    rfm: {
      recency_score: row.r,
      frequency_score: row.f,
      monetary_score: row.m,
      tier: rfmTier(row.r, row.f, row.m),
      last_order_at: row.last_order_at.toISOString(),
      order_count: row.order_count,
      ltv,
    },
    top_products: products,
    churn: _churn(_daysSince(row.last_order_at, now), row.median_gap, snapshot.brandMedianGap),
  };
}

/** GET /cdp/insights/ltv: totals and the five-bucket distribution of customer LTV. */
export async function brandLtv(sql: Sql, brandId: string, freshness: Freshness) {
  const snapshot = await currentSnapshot(sql, brandId, freshness);
  const { ltv } = snapshot;
  return {
    total_revenue: money(ltv.total),
    customer_count: ltv.customers,
    average_ltv: money(ltv.average),
    currency_code: snapshot.currencyCode,
    distribution: LTV_BUCKETS.map((bucket, i) => ({
      ...bucket,
      customer_count: ltv.buckets[i] ?? 0,
    })),
  };
}

/** GET /cdp/insights/rfm: customers per tier and per score. */
export async function brandRfm(sql: Sql, brandId: string, freshness: Freshness) {
  await currentSnapshot(sql, brandId, freshness);
  const rows = await sql<{ r: number; f: number; m: number; n: number; spend: string }[]>`
    select r, f, m, customers as n, spend::text as spend
    from rfm_cell_summaries where brand_id = ${brandId}`;
  const tiers = Object.fromEntries(RFM_TIERS.map((t) => [t, 0])) as Record<RfmTier, number>;
  // Cents as bigints: exact sums of the groups' exact amounts.
  const cents = Object.fromEntries(RFM_TIERS.map((t) => [t, 0n])) as Record<RfmTier, bigint>;
  const scores = {
    recency: [0, 0, 0, 0, 0],
    frequency: [0, 0, 0, 0, 0],
    monetary: [0, 0, 0, 0, 0],
  };
  let customers = 0;
  for (const { r, f, m, n, spend } of rows) {
    const tier = rfmTier(r, f, m);
    tiers[tier] += n;
    cents[tier] += _cents(spend);
    scores.recency[r - 1]! += n;
    scores.frequency[f - 1]! += n;
    scores.monetary[m - 1]! += n;
    customers += n;
  }
  const byScore = (counts: number[]) =>
    Object.fromEntries(counts.map((n, i) => [String(i + 1), n]));
  return {
    customer_count: customers,
    tiers,
    tier_revenue: Object.fromEntries(RFM_TIERS.map((t) => [t, _fromCents(cents[t])])),
    scores: {
      recency: byScore(scores.recency),
      frequency: byScore(scores.frequency),
      monetary: byScore(scores.monetary),
    },
  };
}

/** An exact decimal amount ("12.5", "-3.10") in cents. */
function _cents(amount: string): bigint {
  const [whole, fraction = ""] = money(amount).split(".");
  const negative = whole!.startsWith("-");
  const value = BigInt(whole!.replace("-", "")) * 100n + BigInt(fraction.padEnd(2, "0"));
  return negative ? -value : value;
}

function _fromCents(cents: bigint): string {
  const negative = cents < 0n;
  const abs = negative ? -cents : cents;
  return `${negative ? "-" : ""}${abs / 100n}.${String(abs % 100n).padStart(2, "0")}`;
}

/**
 * Completed-order revenue per UTC month (all completed orders, attributed or not), oldest first:
 * every month from the first order's to the current one, zero when a month had none.
 */
export async function revenueByMonth(sql: Sql, brandId: string, freshness: Freshness) {
  await currentSnapshot(sql, brandId, freshness);
  const rows = await sql<{ month: string; order_count: number; revenue: string }[]>`
    select to_char(month, 'YYYY-MM') as month, order_count, revenue::text as revenue
    from revenue_month_summaries where brand_id = ${brandId} order by month`;
  const byMonth = new Map(rows.map((r) => [r.month, r]));
  const months: { month: string; order_count: number; revenue: string }[] = [];
  if (rows.length === 0) return months;
  const last = Math.max(_monthIndex(rows.at(-1)!.month), _monthIndex(freshness.now.toISOString()));
  for (let i = _monthIndex(rows[0]!.month); i <= last; i++) {
    const month = `${Math.floor(i / 12)}-${String(i % 12 + 1).padStart(2, "0")}`;
    const row = byMonth.get(month);
    months.push({
      month,
      order_count: row?.order_count ?? 0,
      revenue: money(row?.revenue ?? "0"),
    });
  }
  return months;
}

/** Months since year 0 of a "YYYY-MM..." text. */
function _monthIndex(text: string): number {
  return Number(text.slice(0, 4)) * 12 + Number(text.slice(5, 7)) - 1;
}

/** GET /cdp/insights/products: the brand's top products by completed-order revenue. */
export async function brandProducts(
  sql: Sql,
  brandId: string,
  limit: number,
  freshness: Freshness,
) {
  await currentSnapshot(sql, brandId, freshness);
  const rows = await sql<_ProductRow[]>`
    select p.product_id, p.title, p.quantity::int as quantity, p.order_count,
           p.revenue::text as revenue, p.customer_count, p.repeat_purchase_rate
    from product_summaries p where p.brand_id = ${brandId}
    order by p.revenue desc, p.product_id
    limit ${limit}`;
  return rows.map((r) => ({ ...r, revenue: money(r.revenue) }));
}

/** GET /cdp/insights/at-risk: customers past twice their cadence, most valuable first. */
export async function atRiskCustomers(
  sql: Sql,
  brandId: string,
  page: { limit: number; offset: number },
  freshness: Freshness,
) {
  const snapshot = await currentSnapshot(sql, brandId, freshness);
  const brandMedian = snapshot.brandMedianGap;
  const now = freshness.now;
  const risky = sql`
    select s.contact_id, s.order_count, s.spend, s.last_order_at, s.median_gap
    from customer_summaries s
    where s.brand_id = ${brandId}
      and coalesce(s.median_gap, ${brandMedian}::float8) > 0
      and extract(epoch from ${now}::timestamptz - s.last_order_at) / 86400
          >= 2 * coalesce(s.median_gap, ${brandMedian}::float8)`;
  // The page is cut from customers read in spend order (the index) before contacts are joined,
  // so it stops early: joined first, the planner hashed every contact of the brand.
  const rows = await sql<{
    contact_id: string;
    email: string | null;
    shopify_customer_id: string | null;
    order_count: number;
    spend: string;
    last_order_at: Date;
    median_gap: number | null;
  }[]>`
    select r.contact_id, c.email, c.shopify_customer_id, r.order_count, r.spend::text as spend,
           r.last_order_at, r.median_gap
    from (${risky} order by s.spend desc, s.contact_id limit ${page.limit} offset ${page.offset}) r
    join contacts c on c.id = r.contact_id
    order by r.spend desc, r.contact_id`;
  const total = await countToWindow(sql, sql`select 1 from (${risky}) r`);
  return {
    list: rows.map((r) => ({
      contact_id: r.contact_id,
      email: r.email,
      shopify_customer_id: r.shopify_customer_id,
      ltv: money(r.spend),
      order_count: r.order_count,
      last_order_at: r.last_order_at.toISOString(),
      ..._churn(_daysSince(r.last_order_at, now), r.median_gap, brandMedian),
    })),
    total,
  };
}
