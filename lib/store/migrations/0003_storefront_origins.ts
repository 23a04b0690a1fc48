/**
 * Migration 3, "storefront_origins".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 3 of the schema. */
export const storefrontOrigins = {
  version: 3,
  name: "storefront_origins",
  sql: `
      -- Browser origins, besides https://<shop_domain>, allowed to send pixel events for a shop
      -- (its custom storefront domains).
      alter table integrations add column storefront_origins text[] not null default '{}';
    `,
};
