/**
 * Migration 7, "shopify_webhooks".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 7 of the schema. */
export const shopifyWebhooks = {
  version: 7,
  name: "shopify_webhooks",
  sql: `
      -- Shopify webhook deliveries already applied (lib/shopify/webhooks.ts): written in the
      -- transaction of the delivery's effect, so a repeated X-Shopify-Webhook-Id is acknowledged
      -- and never applied twice, and a failed delivery leaves no row and is applied on retry.
      create table webhook_deliveries (
        shop_domain text not null,
        webhook_id text not null,
        topic text not null,
        received_at timestamptz not null,
        primary key (shop_domain, webhook_id)
      );
      create index webhook_deliveries_received_idx on webhook_deliveries (received_at);

      -- Stale-delivery guards: the source's updated_at of the last customers/* webhook applied to
      -- a contact, and the revision_id of the last subscription_contracts/* webhook applied to a
      -- contract. (Orders compare their own updated_at, which is the source's.)
      alter table contacts add column source_updated_at timestamptz;
      alter table subscriptions add column source_revision numeric;

      -- Set when customers/redact detached the order from its customer; later deliveries of the
      -- order never attach a customer again.
      alter table orders add column customer_redacted_at timestamptz;
    `,
};
