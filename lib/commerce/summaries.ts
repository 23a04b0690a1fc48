/**
 * Materialized insight summaries. Brand-wide insights over a million orders cost seconds to compute, so they are read from
 * per-customer and per-product summaries that one refresh recomputes for the whole brand. Every
 * write to a brand's orders bumps the brand's generation in its own transaction; a snapshot
 * records the generation it saw, so a read knows exactly whether it is current. An outdated
 * snapshot is served while it is younger than the allowed staleness (minutes are allowed);
 * past that, the read that notices starts a refresh in the background and still
 * answers from the previous snapshot, so no read waits for a refresh once a brand has a
 * snapshot. One refresher per brand at a time (advisory lock). With no staleness allowed, reads
 * refresh synchronously (always current).
 *
 * @module
 */
import { log } from "../log.ts";
import type { Sql, Tx } from "../store/db.ts";

/** How fresh insights must be: the clock, and how old an outdated snapshot may still be served. */
export interface Freshness {
  now: Date;
  /** 0 = a write is visible to the next read (refreshed synchronously). */
  maxStalenessSeconds: number;
  /**
   * Receives a background refresh started by a read (to await it, or to log its failure);
   * without it the refresh runs detached and a failure is logged.
   */
  background?: (refresh: Promise<unknown>) => void;
}

/** The brand-level figures of a snapshot. */
export interface InsightSnapshot {
  generation: number;
  refreshedAt: Date;
  refreshMs: number;
  brandMedianGap: number | null;
  currencyCode: string | null;
  /** Customer LTV over the brand: exact total and average, count, and the bucket counts. */
  ltv: { total: string; customers: number; average: string; buckets: number[] };
}

/** First key of the two-key advisory lock of a brand's refresh (the second: the brand's hash). */
export const INSIGHTS_REFRESH_LOCK = 0x1_5e_5;

/** Stripes of a brand's generation: concurrent writers rarely share one. */
const _STRIPES = 64;

/** Marks the brand's insights outdated; call in the transaction that changes its orders. */
export async function markInsightsChanged(tx: Tx | Sql, brandId: string): Promise<void> {
  // The generation is the sum of the brand's stripes, and a connection bumps its own: the row
  // lock it takes is held until commit, and another connection's bump need not wait for it
  // (an import's two writers each commit a batch while the other writes; see migration 14).
  await tx`
    insert into insight_generations (brand_id, stripe, generation)
    values (${brandId}, pg_backend_pid() % ${_STRIPES}, 1)
    on conflict (brand_id, stripe) do update set generation = insight_generations.generation + 1`;
}

/** The brand's generation, as a statement's scalar subquery. */
function _generation(sql: Sql | Tx, brandId: string) {
  return sql`(select sum(generation) from insight_generations where brand_id = ${brandId})`;
}

/**
 * The brand's snapshot. Current: served. Outdated but younger than the allowed staleness: served.
 * Older: served while a background refresh replaces it. None yet, or no staleness allowed:
 * refreshed first (or, while another refresh runs, waited for).
 */
export async function currentSnapshot(
  sql: Sql,
  brandId: string,
  freshness: Freshness,
): Promise<InsightSnapshot> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const state = await _state(sql, brandId);
    const snapshot = state.snapshot;
    if (snapshot && snapshot.generation === state.generation) return snapshot;
    const age = freshness.now.getTime() - (snapshot?.refreshedAt.getTime() ?? 0);
    if (snapshot && freshness.maxStalenessSeconds > 0) {
      if (age >= freshness.maxStalenessSeconds * 1000) {
        _refreshInBackground(sql, brandId, freshness);
      }
      return snapshot;
    }
    const refreshed = await refreshSummaries(sql, brandId, freshness.now);
    if (refreshed) return refreshed;
    // Another refresh is running: wait until it commits, then read its snapshot.
    await sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${INSIGHTS_REFRESH_LOCK}, hashtext(${brandId}))`;
    });
  }
  throw new Error("insight summaries could not be refreshed");
}

function _refreshInBackground(sql: Sql, brandId: string, freshness: Freshness): void {
  const refresh = refreshSummaries(sql, brandId, freshness.now);
  if (freshness.background) return freshness.background(refresh);
  refresh.catch((err) =>
    log("error", "insight summaries refresh failed", {
      brand: brandId,
      error: err instanceof Error ? err.message : String(err),
    })
  );
}

async function _state(sql: Sql, brandId: string) {
  const [row] = await sql<{
    generation: string | null;
    snapshot_generation: string | null;
    refreshed_at: Date | null;
    refresh_ms: number | null;
    brand_median_gap: number | null;
    currency_code: string | null;
    ltv_total: string | null;
    ltv_customers: number | null;
    ltv_average: string | null;
    ltv_buckets: number[] | null;
  }[]>`
    select ${_generation(sql, brandId)}::text as generation,
           s.generation::text as snapshot_generation, s.refreshed_at, s.refresh_ms,
           s.brand_median_gap, s.currency_code, s.ltv_total::text as ltv_total, s.ltv_customers,
           s.ltv_average::text as ltv_average, s.ltv_buckets
    from (select 1) one left join insight_snapshots s on s.brand_id = ${brandId}`;
  return {
    generation: Number(row?.generation ?? 0),
    snapshot: row?.snapshot_generation == null ? null : {
      generation: Number(row.snapshot_generation),
      refreshedAt: row.refreshed_at!,
      refreshMs: row.refresh_ms!,
      brandMedianGap: row.brand_median_gap,
      currencyCode: row.currency_code,
      ltv: {
        total: row.ltv_total!,
        customers: row.ltv_customers!,
        average: row.ltv_average!,
        buckets: row.ltv_buckets!,
      },
    },
  };
}

/**
 * Recomputes the brand's summaries in one repeatable-read transaction, so the generation it
 * records is the one of the data it read. Returns null at once when another refresh of the brand
 * holds the lock, or committed after this one's snapshot (see below).
 */
export async function refreshSummaries(
  sql: Sql,
  brandId: string,
  now: Date,
): Promise<InsightSnapshot | null> {
  try {
    return await _refresh(sql, brandId, now);
  } catch (err) {
    // The snapshot is taken by the statement that takes the lock, before it does: a refresh
    // that committed (and let the lock go) in between is invisible to this one, whose writes
    // then meet its rows (a unique violation, or a serialization failure on a row it changed).
    // That refresh did the work; the caller waits for the lock and reads it, as when it is held.
    const code = (err as { code?: unknown })?.code;
    if (code === "23505" || code === "40001") return null;
    throw err;
  }
}

async function _refresh(
  sql: Sql,
  brandId: string,
  now: Date,
): Promise<InsightSnapshot | null> {
  const started = performance.now();
  return await sql.begin("isolation level repeatable read", async (t) => {
    const tx = t as unknown as Tx;
    const [lock] = await tx<{ ok: boolean }[]>`
      select pg_try_advisory_xact_lock(${INSIGHTS_REFRESH_LOCK}, hashtext(${brandId})) as ok`;
    if (!lock!.ok) return null;
    const [gen] = await tx<{ generation: string | null }[]>`
      select ${_generation(tx, brandId)}::text as generation`;
    const generation = Number(gen?.generation ?? 0);
    // Sorts and hashes over a brand's orders fit in memory instead of spilling to disk. Ids are
    // sorted and grouped byte-wise (collate "C"): the default collation's comparisons made the
    // sorts several times slower, and ids have no linguistic order.
    await tx`select set_config('work_mem', '128MB', true)`;
    await tx`delete from customer_summaries where brand_id = ${brandId}`;
    await tx`delete from product_summaries where brand_id = ${brandId}`;
    await tx`delete from revenue_month_summaries where brand_id = ${brandId}`;
    await tx`delete from rfm_cell_summaries where brand_id = ${brandId}`;
    // Per customer: count, spend, first and last order, median gap between consecutive orders,
    // most frequent currency; then R, F and M by quintile (cume_dist: ties share a score). The
    // gaps are computed once, for the customers' medians and the brand's.
    const [brand] = await tx<{ median: number | null; currency: string | null }[]>`
      with o as materialized (
        select contact_id, total, created_at, currency_code,
               extract(epoch from created_at - lag(created_at) over (
                 partition by contact_id collate "C" order by created_at)) / 86400 as gap
        from orders
        where brand_id = ${brandId} and state = 'complete' and contact_id is not null
      ),
      c as (
        select contact_id, count(*)::int as order_count, sum(total) as spend,
               min(created_at) as first_order_at, max(created_at) as last_order_at,
               percentile_cont(0.5) within group (order by gap)::float8 as median_gap,
               mode() within group (order by currency_code) as currency_code
        from o group by contact_id
      ),
      stored as (
        insert into customer_summaries (brand_id, contact_id, order_count, spend, first_order_at,
                                        last_order_at, median_gap, currency_code, r, f, m)
        select ${brandId}, c.contact_id, c.order_count, c.spend, c.first_order_at,
               c.last_order_at, c.median_gap, c.currency_code,
               least(5, greatest(1, ceil(cume_dist() over (order by c.last_order_at) * 5)))::int,
               least(5, greatest(1, ceil(cume_dist() over (order by c.order_count) * 5)))::int,
               least(5, greatest(1, ceil(cume_dist() over (order by c.spend) * 5)))::int
        from c
        returning 1
      )
      select (select percentile_cont(0.5) within group (order by gap)::float8 from o) as median,
             (select mode() within group (order by currency_code) from o) as currency,
             (select count(*) from stored) as customers`;
    // Per product: one row per (product, buyer, order) first, so that orders and buyers are
    // counted by grouping rather than by count(distinct).
    await tx`
      insert into product_summaries (brand_id, product_id, title, quantity, order_count, revenue,
                                     customer_count, repeat_purchase_rate)
      with per_order as (
        select li.product_id collate "C" as product_id, o.contact_id collate "C" as contact_id,
               max(li.title) as title, sum(li.quantity) as quantity,
               sum(li.price * li.quantity) as revenue
        from orders o
        cross join lateral jsonb_to_recordset(o.line_items)
          as li(product_id text, title text, quantity integer, price numeric)
        where o.brand_id = ${brandId} and o.state = 'complete' and li.product_id is not null
        group by 1, 2, o.id collate "C"
      ),
      per_buyer as (
        select product_id, contact_id, max(title) as title, sum(quantity) as quantity,
               count(*) as orders, sum(revenue) as revenue
        from per_order group by product_id, contact_id
      )
      select ${brandId}, product_id, max(title), sum(quantity), sum(orders)::int, sum(revenue),
             count(contact_id)::int,
             coalesce(round(avg((orders > 1)::int) filter (where contact_id is not null), 4), 0)
               ::float8
      from per_buyer group by product_id`;
    // Per RFM cell, and the LTV totals and buckets (lib/commerce/insights.ts LTV_BUCKETS).
    await tx`
      insert into rfm_cell_summaries (brand_id, r, f, m, customers, spend)
      select brand_id, r, f, m, count(*)::int, sum(spend)
      from customer_summaries where brand_id = ${brandId}
      group by brand_id, r, f, m`;
    const [ltv] = await tx<
      { total: string; customers: number; average: string; buckets: number[] }[]
    >`
      select coalesce(sum(spend), 0)::text as total, count(*)::int as customers,
             coalesce(round(avg(spend), 2), 0)::text as average,
             array[count(*) filter (where spend < 100),
                   count(*) filter (where spend >= 100 and spend < 250),
                   count(*) filter (where spend >= 250 and spend < 500),
                   count(*) filter (where spend >= 500 and spend < 1000),
                   count(*) filter (where spend >= 1000)]::int[] as buckets
      from customer_summaries where brand_id = ${brandId}`;
    // Per UTC month: every completed order, attributed to a customer or not.
    await tx`
      insert into revenue_month_summaries (brand_id, month, order_count, revenue)
      select ${brandId}, (date_trunc('month', created_at, 'UTC') at time zone 'UTC')::date,
             count(*)::int, sum(total)
      from orders where brand_id = ${brandId} and state = 'complete'
      group by 2`;
    const refreshMs = Math.round(performance.now() - started);
    await tx`
      insert into insight_snapshots (brand_id, generation, refreshed_at, refresh_ms,
                                     brand_median_gap, currency_code, ltv_total, ltv_customers,
                                     ltv_average, ltv_buckets)
      values (${brandId}, ${generation}, ${now}, ${refreshMs}, ${brand!.median}, ${brand!.currency},
              ${ltv!.total}::numeric, ${ltv!.customers}, ${ltv!.average}::numeric,
              ${ltv!.buckets}::int[])
      on conflict (brand_id) do update set
        generation = excluded.generation, refreshed_at = excluded.refreshed_at,
        refresh_ms = excluded.refresh_ms, brand_median_gap = excluded.brand_median_gap,
        currency_code = excluded.currency_code, ltv_total = excluded.ltv_total,
        ltv_customers = excluded.ltv_customers, ltv_average = excluded.ltv_average,
        ltv_buckets = excluded.ltv_buckets`;
    return {
      generation,
      refreshedAt: now,
      refreshMs,
      brandMedianGap: brand!.median,
      currencyCode: brand!.currency,
      ltv: ltv!,
    };
  });
}
