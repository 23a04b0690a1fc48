/**
 * Migration 9, "commerce_summaries".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 9 of the schema. */
export const commerceSummaries = {
  version: 9,
  name: "commerce_summaries",
  sql: `
      -- Insights read materialized summaries (lib/commerce/summaries.ts). Every write to a
      -- brand's orders bumps its generation in the writing transaction; a refresh records the
      -- generation its snapshot saw, so a snapshot is known current or outdated exactly.
      create table insight_generations (
        brand_id text primary key references brands (id) on delete cascade,
        generation bigint not null
      );
      create table insight_snapshots (
        brand_id text primary key references brands (id) on delete cascade,
        generation bigint not null,
        refreshed_at timestamptz not null,
        refresh_ms integer not null,
        brand_median_gap float8,
        currency_code text
      );
      -- One row per customer (contact with a completed order) as of the snapshot, with its
      -- brand-relative RFM scores. Ids compare byte-wise (collate "C"): a refresh rewrites every
      -- row of a brand, and the default collation made that indexing several times slower.
      create table customer_summaries (
        brand_id text not null references brands (id) on delete cascade,
        contact_id text collate "C" not null,
        order_count integer not null,
        spend numeric(20, 2) not null,
        first_order_at timestamptz not null,
        last_order_at timestamptz not null,
        median_gap float8,
        currency_code text,
        r smallint not null,
        f smallint not null,
        m smallint not null,
        primary key (brand_id, contact_id)
      );
      create index customer_summaries_spend_idx
        on customer_summaries (brand_id, spend desc, contact_id);
      create table product_summaries (
        brand_id text not null references brands (id) on delete cascade,
        product_id text collate "C" not null,
        title text not null,
        quantity bigint not null,
        order_count integer not null,
        revenue numeric not null,
        customer_count integer not null,
        repeat_purchase_rate float8 not null,
        primary key (brand_id, product_id)
      );
      create index product_summaries_revenue_idx
        on product_summaries (brand_id, revenue desc, product_id);

      -- GET /cdp/commerce/orders?state=... pages and counts one state in date order.
      create index orders_brand_state_created_idx on orders (brand_id, state, created_at desc, id);

      -- The customer lookup finds profiles by identity field (lib/commerce/customers.ts).
      create index profiles_email_lower_idx on profiles (scope, lower(properties ->> 'email'));
      create index profiles_phone_lower_idx
        on profiles (scope, lower(properties ->> 'phoneNumber'));
      create index profiles_shopify_id_lower_idx
        on profiles (scope, lower(properties ->> 'shopifyCustomerId'));
    `,
};
