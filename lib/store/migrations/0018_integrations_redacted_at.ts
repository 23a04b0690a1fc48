/**
 * Migration 18, "integrations_redacted_at".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 18 of the schema. */
export const integrationsRedactedAt = {
  version: 18,
  name: "integrations_redacted_at",
  sql: `
      -- Set by Shopify's shop/redact, which erased the shop's data: the brand may not write
      -- (API keys, queued events, imports) until an operator reconnects the integration, which
      -- clears it.
      alter table integrations add column redacted_at timestamptz;
    `,
};
