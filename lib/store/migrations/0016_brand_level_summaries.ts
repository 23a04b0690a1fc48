/**
 * Migration 16, "brand_level_summaries".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 16 of the schema. */
export const brandLevelSummaries = {
  version: 16,
  name: "brand_level_summaries",
  sql: `
      -- Brand-level figures recomputed with the other summaries (lib/commerce/summaries.ts), so
      -- that brand insights read a few rows instead of every customer's summary: completed-order
      -- revenue per UTC month, customers and spend per RFM cell, and the LTV totals and buckets
      -- on the snapshot. Snapshots without them are dropped: the next read refreshes.
      create table revenue_month_summaries (
        brand_id text not null references brands (id) on delete cascade,
        month date not null,
        order_count integer not null,
        revenue numeric not null,
        primary key (brand_id, month)
      );
      create table rfm_cell_summaries (
        brand_id text not null references brands (id) on delete cascade,
        r smallint not null,
        f smallint not null,
        m smallint not null,
        customers integer not null,
        spend numeric not null,
        primary key (brand_id, r, f, m)
      );
      delete from insight_snapshots;
      alter table insight_snapshots
        add column ltv_total numeric not null,
        add column ltv_customers integer not null,
        add column ltv_average numeric not null,
        add column ltv_buckets integer[] not null;
    `,
};
