/**
 * Insights over completed orders only (spec section 3): lifetime value, RFM, top products and
 * churn, per customer and per brand. Every amount is exact (numeric) and rendered with 2
 * decimals. Formulas are in the README ("Insights").
 */
import type { Sql } from "../db.ts";
import { OFFSET_WINDOW } from "../pagination.ts";
import { money } from "./orders.ts";

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

/**
 * One row per customer (contact with at least one completed order) with R, F and M scores
 * 1..5 by quintile within the brand. cume_dist gives tied customers the same score.
 */
function _scoredCustomers(sql: Sql, brandId: string) {
  return sql`
    select c.*,
      least(5, greatest(1, ceil(cume_dist() over (order by c.last_order_at) * 5)))::int as r,
      least(5, greatest(1, ceil(cume_dist() over (order by c.order_count) * 5)))::int as f,
      least(5, greatest(1, ceil(cume_dist() over (order by c.spend) * 5)))::int as m
    from (
      select contact_id, count(*)::int as order_count, sum(total) as spend,
             min(created_at) as first_order_at, max(created_at) as last_order_at
      from orders
      where brand_id = ${brandId} and state = 'complete' and contact_id is not null
      group by contact_id
    ) c`;
}

/** The median days between consecutive completed orders: a contact's, or the brand's. */
async function _medianGap(sql: Sql, brandId: string, contactId?: string): Promise<number | null> {
  const [row] = await sql<{ median: number | null }[]>`
    select percentile_cont(0.5) within group (order by gap)::float8 as median
    from (
      select extract(epoch from created_at - lag(created_at) over (
               partition by contact_id order by created_at)) / 86400 as gap
      from orders
      where brand_id = ${brandId} and state = 'complete' and contact_id is not null
        ${contactId ? sql`and contact_id = ${contactId}` : sql``}
    ) gaps
    where gap is not null`;
  return row?.median ?? null;
}

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

/** Top products by completed-order revenue, of one contact or of the whole brand. */
async function _topProducts(sql: Sql, brandId: string, limit: number, contactId?: string) {
  const rows = await sql<{
    product_id: string;
    title: string;
    quantity: number;
    order_count: number;
    revenue: string;
    customer_count: number;
    repeat_purchase_rate: number;
  }[]>`
    with items as (
      select o.contact_id, o.id as order_id, li.product_id, li.title, li.quantity,
             li.price * li.quantity as revenue
      from orders o join order_line_items li on li.order_id = o.id
      where o.brand_id = ${brandId} and o.state = 'complete' and li.product_id is not null
    ),
    buyers as (
      select product_id, contact_id, count(distinct order_id) as orders
      from items where contact_id is not null group by product_id, contact_id
    ),
    reach as (
      select product_id, count(*)::int as customer_count,
             round(avg((orders > 1)::int), 4)::float8 as repeat_purchase_rate
      from buyers group by product_id
    ),
    ranked as (
      select product_id, max(title) as title, sum(quantity)::int as quantity,
             count(distinct order_id)::int as order_count, sum(revenue) as revenue
      from items
      ${contactId ? sql`where contact_id = ${contactId}` : sql``}
      group by product_id
    )
    select ranked.product_id, ranked.title, ranked.quantity, ranked.order_count,
           ranked.revenue::text as revenue, coalesce(reach.customer_count, 0) as customer_count,
           coalesce(reach.repeat_purchase_rate, 0) as repeat_purchase_rate
    from ranked left join reach using (product_id)
    order by ranked.revenue desc, ranked.product_id
    limit ${limit}`;
  return rows.map((r) => ({ ...r, revenue: money(r.revenue) }));
}

/** Spec 2.9: a customer's insights; zeros and nulls (never 404) without completed orders. */
export async function customerInsights(
  sql: Sql,
  brandId: string,
  contactId: string | null,
  now: Date,
) {
  const [row] = contactId
    ? await sql<{
      order_count: number;
      spend: string;
      first_order_at: Date;
      last_order_at: Date;
      r: number;
      f: number;
      m: number;
      currency: string | null;
    }[]>`
      select s.order_count, s.spend::text as spend, s.first_order_at, s.last_order_at, s.r, s.f, s.m,
             (select mode() within group (order by currency_code) from orders
              where contact_id = ${contactId} and state = 'complete') as currency
      from (${_scoredCustomers(sql, brandId)}) s
      where s.contact_id = ${contactId}`
    : [];
  if (!row) {
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
  const ltv = money(row.spend);
  const [aov] = await sql<
    { aov: string }[]
  >`select round(${row.spend}::numeric / ${row.order_count}, 2)::text as aov`;
  const [own, brand] = await Promise.all([
    _medianGap(sql, brandId, contactId!),
    _medianGap(sql, brandId),
  ]);
  return {
    ltv,
    order_count: row.order_count,
    aov: money(aov!.aov),
    first_order_at: row.first_order_at.toISOString(),
    last_order_at: row.last_order_at.toISOString(),
    currency_code: row.currency,
    rfm: {
      recency_score: row.r,
      frequency_score: row.f,
      monetary_score: row.m,
      tier: rfmTier(row.r, row.f, row.m),
      last_order_at: row.last_order_at.toISOString(),
      order_count: row.order_count,
      ltv,
    },
    top_products: await _topProducts(sql, brandId, 5, contactId!),
    churn: _churn(_daysSince(row.last_order_at, now), own, brand),
  };
}

/** GET /cdp/insights/ltv: totals and the five-bucket distribution of customer LTV. */
export async function brandLtv(sql: Sql, brandId: string) {
  const [row] = await sql<
    { total: string | null; customers: number; average: string | null; currency: string | null }[]
  >`
    select sum(spend)::text as total, count(*)::int as customers,
           round(avg(spend), 2)::text as average,
           (select mode() within group (order by currency_code) from orders
            where brand_id = ${brandId} and state = 'complete' and contact_id is not null) as currency
    from (
      select sum(total) as spend from orders
      where brand_id = ${brandId} and state = 'complete' and contact_id is not null
      group by contact_id
    ) c`;
  const buckets = await sql<{ bucket: number; n: number }[]>`
    select width_bucket(spend, array[100, 250, 500, 1000]::numeric[]) as bucket, count(*)::int as n
    from (
      select sum(total) as spend from orders
      where brand_id = ${brandId} and state = 'complete' and contact_id is not null
      group by contact_id
    ) c
    group by 1`;
  const counts = new Map(buckets.map((b) => [b.bucket, b.n]));
  return {
    total_revenue: money(row!.total ?? "0"),
    customer_count: row!.customers,
    average_ltv: money(row!.average ?? "0"),
    currency_code: row!.currency,
    distribution: LTV_BUCKETS.map((bucket, i) => ({
      ...bucket,
      customer_count: counts.get(i) ?? 0,
    })),
  };
}

/** GET /cdp/insights/rfm: customers per tier and per score. */
export async function brandRfm(sql: Sql, brandId: string) {
  const rows = await sql<{ r: number; f: number; m: number; n: number }[]>`
    select r, f, m, count(*)::int as n from (${_scoredCustomers(sql, brandId)}) s group by r, f, m`;
  const tiers = Object.fromEntries(RFM_TIERS.map((t) => [t, 0])) as Record<RfmTier, number>;
  const scores = {
    recency: [0, 0, 0, 0, 0],
    frequency: [0, 0, 0, 0, 0],
    monetary: [0, 0, 0, 0, 0],
  };
  let customers = 0;
  for (const { r, f, m, n } of rows) {
    tiers[rfmTier(r, f, m)] += n;
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
    scores: {
      recency: byScore(scores.recency),
      frequency: byScore(scores.frequency),
      monetary: byScore(scores.monetary),
    },
  };
}

/** GET /cdp/insights/products: the brand's top products. */
export async function brandProducts(sql: Sql, brandId: string, limit: number) {
  return await _topProducts(sql, brandId, limit);
}

/** GET /cdp/insights/at-risk: customers past twice their cadence, most valuable first. */
export async function atRiskCustomers(
  sql: Sql,
  brandId: string,
  page: { limit: number; offset: number },
  now: Date,
) {
  const brandMedian = await _medianGap(sql, brandId);
  const risky = sql`
    select contact_id, order_count, spend, last_order_at, median_gap
    from (
      select contact_id, count(*)::int as order_count, sum(total) as spend,
             max(created_at) as last_order_at,
             percentile_cont(0.5) within group (order by gap)::float8 as median_gap
      from (
        select contact_id, total, created_at,
               extract(epoch from created_at - lag(created_at) over (
                 partition by contact_id order by created_at)) / 86400 as gap
        from orders
        where brand_id = ${brandId} and state = 'complete' and contact_id is not null
      ) o
      group by contact_id
    ) customers
    where coalesce(median_gap, ${brandMedian}::float8) > 0
      and extract(epoch from ${now}::timestamptz - last_order_at) / 86400
          >= 2 * coalesce(median_gap, ${brandMedian}::float8)`;
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
    from (${risky}) r join contacts c on c.id = r.contact_id
    order by r.spend desc, r.contact_id
    limit ${page.limit} offset ${page.offset}`;
  const [count] = await sql<{ n: number }[]>`
    select count(*)::int as n from (select 1 from (${risky}) r limit ${OFFSET_WINDOW + 1}) capped`;
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
    total: count!.n,
  };
}
