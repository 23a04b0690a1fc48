/**
 * Migration 23, "pixel_claims".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 23 of the schema. */
export const pixelClaims = {
  version: 23,
  name: "pixel_claims",
  sql: `
      -- What a storefront pixel's checkout_completed says: "visitor client_id placed order
      -- order_id" (Shopify's order number), unverified. lib/shopify/pixel_claims.ts links the
      -- visitor to the customer only once an order that came from Shopify (a verified webhook or
      -- the backfill) confirms it; a pending claim waits for its order until expires_at.
      create table pixel_claims (
        scope text not null,
        order_id text not null,
        client_id text not null,
        email text,
        claimed_at timestamptz not null,
        expires_at timestamptz not null,
        status text not null default 'pending'
          check (status in ('pending', 'merged', 'refused')),
        reason text,
        profile_id text,
        resolved_at timestamptz,
        primary key (scope, order_id, client_id)
      );
      create index pixel_claims_pending on pixel_claims (expires_at) where status = 'pending';
    `,
};
