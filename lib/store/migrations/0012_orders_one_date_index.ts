/**
 * Migration 12, "orders_one_date_index".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 12 of the schema. */
export const ordersOneDateIndex = {
  version: 12,
  name: "orders_one_date_index",
  sql: `
      -- The order list reads each state from (brand_id, state, created_at desc, id) and merges
      -- them (lib/commerce/reads.ts), so this second date index is one less to maintain per order.
      drop index orders_brand_created_idx;
    `,
};
